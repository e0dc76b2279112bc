"""Read a judge's score out of its free-text reply: scale-aware, and conservative.

A judge is asked to end with ``Score: N``; real judges (a 135M model especially) echo the rubric,
mention other numbers, pad with markdown or answer in JSON, and chat-tuned open models write their
verdict as a sentence. The extractor returns *no* score rather than a guess: a wrong score silently
corrupts every downstream statistic, while a missing one is visible, re-asked, and counted.

What is read (``ScoreReading.reason`` on success), one module each:

    labelled     ``Score: 4``, ``**Score:** 4/5``, ``Rating: [[4]]``, ``SCORE - 2``, ``Final score: 4.``,
                 ``Score (1-5): 4``, ``Score:`` with the number alone on one of the next two lines.
                 Labels: score, rating, grade, plus any ``labels=`` passed (e.g. "coherence")  [explicit]
    json         an object with a score/rating/grade key anywhere, fenced or not: ``{"score": 4}``
    bracketed    ``[[4]]`` without a label (MT-Bench: "I would rate it a [[9]]")
    phrase       a verdict sentence: "I give it a score of 4", "I would rate it 4 out of 5", "my score
                 is 4", "I'd give this a 4"; a bare "score of 4" is not one  [phrases]
    verdict_verb, verdict_clause, verdict_named
                 the prose grammar: "I'd rate this summary 4", "..., resulting in a score of 4", "...,
                 resulting in a low relevance score of 2", "a fluency score of 4"  [prose_verdicts]
    fraction_verb, fraction_noun, fraction_closing
                 "N out of M" in prose, bound to a verb, a score noun, or closing the reply: "I would
                 rate the AI assistant's response as an 8 out of 10", "has a score of 4 out of 5 for
                 accuracy", "... \\n\\n4 out of 5.", "is a 4 out of 5 in relevance"; never a count ("2
                 out of 4 claims are supported", "a 2 out of 5 chance")  [fraction_verdicts]
    fraction_closing, verdict_closing
                 the verdict that ends the reply inside its last sentence: "...; 4 out of 5.", "...,
                 score of 4.", "... therefore it is irrelevant (2/5)."; never "(2/5 claims)"
                 [closing_verdicts]
                 Every prose form is read with number words too, where the digit would be a verdict:
                 "a score of two", "scoring a one out of five"; never "one of the five points"
                 [number_words]. Where an older reading reads the same number, its reason stays.
    bare_number  the whole reply is a number: "4", "4.", "**4**", "- 4", "4/5", "1 (poor)"
    decimal_rounded, decimal_kept
                 a decimal on an integer scale ("Score: 3.5/5"), scored only under the experiment's
                 decimal policy, "round" (3.5 -> 4, halves up) or "keep" (3.5); by default it is read as
                 ``non_integer``, no score, with the value in ``stated``  [decimals]

Precedence [extract, candidates]:

1. Explicit verdicts (labelled, json, bracketed) beat prose verdicts (phrase and both grammars), which
   beat a bare number.
2. Among explicit verdicts the one whose number comes LAST in the text wins (Inspect AI's "last
   GRADE wins"): judges reason first and conclude last, and an earlier verdict is more likely
   quoted, revised or part of an example. Same for prose verdicts. A later verdict wins even over an
   earlier valid one when it is itself unusable: the judge's last word is its verdict, and falling
   back to an earlier one would be a guess.
3. The winning verdict is then checked against the scale, in this order; failing gives no score:
   a denominator (``4/10``, ``4 out of 10``) must equal ``scale.max`` (else ``scale_mismatch``);
   the value must lie in [min, max], never clamped (else ``out_of_range``); on an integer scale it
   must be integral, ``4.0`` is read as 4 but ``4.5`` is not rounded (else ``non_integer``, which the
   decimal policy may turn into a score).

Never a verdict (the candidate is dropped, as if absent):

* a number followed by ``:``, ``=``, or "for/if/when/means <number>": a rubric line ("score of 5 :
  0 mistakes", "Score: 5 : 0 mistakes", "score of 5 for 0 mistakes"), whatever precedes it;
* a number followed by a count noun or ``%`` ("Score: 2 mistakes", "gets 2 weeks", "80%");
* a number glued to letters ("4th"); ``[[0]]`` right after a name or a bracket (code: ``dp[[0]]``);
* with the value on a later line than its label, anything else on that line ("Score:" and then
  "1. First, ..." on the next line: a numbered list);
* in prose: a count or a measure, a partitive, a threshold, a condition, a negation, a purpose, a
  generic subject [prose_context].

A verdict that is a range or a choice ("Score: 3-4", "Score: 1-5", "3 or 4", "3 to 4") is
``ambiguous``; a dash followed by a rubric description is not a range ("Score: 4 - 1-2 mistakes",
"Score: 5 - 0 mistakes": the number after the dash starts a range of its own, or is smaller), and the
second half of a range is no later verdict ("Rating: [[3]] or [[4]]" is ambiguous, not 4). In prose,
a range that is the whole scale or leaves it ("rate it 1-5") is the scale echoed and no verdict at all,
as is any range after a grammar verdict ("it scores 1-5 on average"). A label followed by a
placeholder ("Score: [your score, as a number between 1 and 5]") is the prompt's template echoed:
``template_echo`` when nothing else is readable. Empty or whitespace-only text is ``empty``; anything
else unreadable is ``no_score``. Numbers are ASCII digits, and number words (zero to ten) in prose
verdicts only ("Score: four" is not read).

With ``metric`` (the metric the call asked for, passed by the stage), a reply that rates several metrics
one line each ("Coherence: 4/5\\nFluency: 3/5") is read for that metric only [metric_lines].

Integral values come back as ``int``, others as ``float``.
"""

from pipeline.judges.scores.decimals import DECIMAL_POLICIES, DecimalPolicy, apply_decimal_policy
from pipeline.judges.scores.explicit import DEFAULT_LABELS
from pipeline.judges.scores.extract import extract_score, read_verdict
from pipeline.judges.scores.reading import (
    DEFAULT_SCALE,
    READ_REASONS,
    ReadReason,
    Reason,
    Scale,
    ScoreReading,
    UnreadReason,
)

__all__ = [
    "DECIMAL_POLICIES",
    "DEFAULT_LABELS",
    "DEFAULT_SCALE",
    "READ_REASONS",
    "DecimalPolicy",
    "ReadReason",
    "Reason",
    "Scale",
    "ScoreReading",
    "UnreadReason",
    "apply_decimal_policy",
    "extract_score",
    "read_verdict",
]
