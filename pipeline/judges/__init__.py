"""Judges: how a score is asked for and read. Imports only pipeline.llm and pipeline.data; the
statistics that measure a judge against people are a layer of their own beside this one
(pipeline.stats).

The vocabulary, one meaning per name:

    Judge            judgement.py   judge(subject, context) -> Judgement: one question, its re-asks
    Judgement        judgement.py   what a judge said: its value or None (never a default), how it
                                    was read, its reasons, the reply as written, every call's key
    LikertScore      likert.py      the 1-5 a judge answers on; to_unit maps it onto 0-1
    ScoreDistribution, expected_score
                     geval.py       G-Eval: the probability of each score at its token, and their
                                    expected value
    ...Reply                        what a backend constrains a judge's reply to (RubricReply,
                                    DimensionsReply, EvaluationReply, and in the designs' folders
                                    RatingReply, PairwiseReply, SummEvalReply)
    ...Judgement, ...Score          a design's record of a judgement, as written to its outputs
                                    (MetricJudgement, AssessmentJudgements, ScoredDimensions /
                                    UnscoredDimensions, SummEvalJudgement; a criterion's CriterionScore)
    ScoreReading     scores.py      what the text extractor read from a free reply
    Scale            scores.py      the range the extractor reads a score on

The judges: the text extractor (scores, prose_verdicts); rubric/, the paper's assessor and judge
(RubricJudge); structured/, a judge of any dimensions at once (DimensionsJudge); quality/, the
answer generator and its evaluator (QualityEvaluator). The selection's CriterionJudge and
PairwiseJudge and the SummEval judge live in their designs' folders.
"""
