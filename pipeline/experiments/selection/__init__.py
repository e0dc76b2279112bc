"""Selection among candidates (seed 001, issue 11): weighted criteria, a diverse top-k, pairwise
tie-breaks and an explanation for every pick.

How a request flows through the modules:

    pools.request_pools(settings)            each request, its framework, its pool (retrieve.py)
    criteria.judged_score / attribute_score  each candidate's score per criterion, with its calls
    select.select(...)                       ranking by weighted score (order=() at first)
    ties.near_ties(ranking, weighted, m)     adjacent pairs to ask the judge, in both orders
    ties.fold_verdicts / position_consistency / tie_break_order
    select.select(..., order=tie_order, tie_margin=m)   the final picks, unmet targets, price of diversity
    explain.explain(...)                     one record per pick, every number traced to an input
"""
