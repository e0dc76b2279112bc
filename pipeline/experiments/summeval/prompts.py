"""Rubric prompts for SummEval's four dimensions, in our own words after the definitions in
Fabbri et al. (2021), "SummEval: Re-evaluating Summarization Evaluation", section 4.

SummEval's annotators rated each summary 1-5 on:
    coherence    the summary as a whole: well structured and organised, building from sentence to
                 sentence into a body of information about a topic, not a heap of related facts
    consistency  factual agreement with the source: only statements the article supports;
                 invented facts are penalised
    fluency      each sentence on its own: no repetition, formatting or capitalisation problems,
                 no ungrammatical fragments that make it hard to read
    relevance    choice of content: the article's important information, without redundancy or
                 excess detail

Layout, for cost: the rubric opens the prompt, then the article, then the summary, so the calls on
one article and dimension share everything up to the summary, and the embedded backend re-uses
that evaluated prefix (pipeline/llm/prefix_reuse.py) across the article's 12 systems.
The reply ends with `Score: N`, which pipeline/scores.py reads.
"""

from __future__ import annotations

DIMENSIONS: tuple[str, ...] = ("coherence", "consistency", "fluency", "relevance")

_DEFINITIONS: dict[str, str] = {
    "coherence": (
        "Coherence: how well the summary holds together as a whole. A coherent summary is organised "
        "and reads as one connected account of its topic, each sentence following from the one "
        "before; a summary that lists loosely related facts in no useful order is not coherent."
    ),
    "consistency": (
        "Consistency: whether every statement in the summary agrees with the article. A consistent "
        "summary states only facts the article supports. Any claim the article does not make, or "
        "contradicts (a wrong name, number, place or event), lowers the score."
    ),
    "fluency": (
        "Fluency: the quality of the individual sentences. Fluent sentences are grammatical and easy "
        "to read. Repeated words or phrases, broken formatting, wrong capitalisation and sentence "
        "fragments lower the score."
    ),
    "relevance": (
        "Relevance: whether the summary picks out the article's important information. A relevant "
        "summary keeps the main points and leaves out minor details; missing main points, "
        "repeating itself, or spending words on unimportant details lowers the score."
    ),
}

_ANCHORS: dict[str, str] = {
    "coherence": "1 = disjointed, no clear thread; 3 = partly organised; 5 = well organised throughout",
    "consistency": (
        "1 = mostly unsupported or wrong; 3 = some unsupported claims; 5 = every statement supported"
    ),
    "fluency": "1 = hard to read; 3 = readable with several errors; 5 = no errors",
    "relevance": (
        "1 = misses the main points; 3 = some main points with padding; 5 = all main points, concisely"
    ),
}

_RUBRIC = """You will rate one summary of a news article on one quality, {name}.

{definition}

Scale: {anchors}.

Read the article, then the summary, and rate the summary's {name} only."""

_ANSWER = "Answer with one line in this form: Score: N (N is a whole number from 1 to 5)."


def rubric_prompt(dimension: str, article: str, summary: str) -> str:
    """The judge prompt for one summary on one dimension."""
    if dimension not in _DEFINITIONS:
        raise ValueError(f"unknown SummEval dimension {dimension!r}; one of {', '.join(DIMENSIONS)}")
    rubric = (
        _RUBRIC.replace("{definition}", _DEFINITIONS[dimension])
        .replace("{anchors}", _ANCHORS[dimension])
        .replace("{name}", dimension)
    )
    # Joined, not formatted: the article and the summary are data and may contain anything.
    return f"{rubric}\n\nArticle:\n{article.strip()}\n\nSummary:\n{summary.strip()}\n\n{_ANSWER}"
