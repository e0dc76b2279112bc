"""The words and phrase shapes the prose-verdict grammars are built from.

Every repeat here is bounded, so each pattern built from these pieces has a bounded width: one match
attempt reads at most a few hundred characters, and scanning a reply is linear in its length.
"""

from __future__ import annotations

from typing import Final

SP: Final = r"[ \t]{1,3}"
NUM_B: Final = r"-?[0-9]{1,6}(?:\.[0-9]{1,6})?"
# "4", "**4**", "[4]", "4/5", "4 out of 5"
VALUE_B: Final = (
    rf"[*_]{{0,2}}(?:(?P<open>\[\[?|\()[ \t]{{0,3}})?(?P<num>{NUM_B})"
    rf"(?:[ \t]{{0,3}}(?:\]\]?|\)))?[*_]{{0,2}}"
    rf"(?:[ \t*_]{{0,6}}(?:/|\bout{SP}of\b)[ \t*_]{{0,6}}(?P<den>{NUM_B}))?"
)
# The same with the denominator required: "4/5", "4 out of 5", "**4** out of 5". "3 out of the 5
# sections" is no fraction: the denominator follows "out of" directly.
FRACTION_B: Final = (
    rf"[*_]{{0,2}}(?P<num>{NUM_B})[*_]{{0,2}}"
    rf"(?:[ \t]{{0,3}}/[ \t]{{0,3}}|{SP}out{SP}of{SP})[*_]{{0,2}}(?P<den>{NUM_B})[*_]{{0,2}}"
)
WORD: Final = r"[a-z][a-z'’-]{0,24}"
DETERMINER: Final = r"(?:the|this|that|its|their|your|my|our)"
# "it", "this summary", "the candidate's response": what is scored, two words at most after a determiner.
OBJECT: Final = rf"(?:it|this|that|them|these|those|{DETERMINER}{SP}{WORD}(?:{SP}{WORD})?)"
# A longer noun phrase, only before a linking "as"/"at" or an article, which mark where it ends: "the
# AI assistant's response as", "the response provided by the AI assistant to the user question "Why is
# the sky blue?" a", up to 24 words. Its words may carry digits ("whether 9/11 was an inside job") and
# may be quotations; no sentence ends inside it.
_TOKEN: Final = r"(?:[a-z0-9][a-z0-9'’/-]{0,24}|\"[^\"\n]{1,80}\"|“[^”\n]{1,80}”)"
LONG_OBJECT: Final = rf"(?:it|this|that|{DETERMINER}{SP}{_TOKEN})(?:{SP}{_TOKEN}){{0,23}}"
SCORE_VERB: Final = r"(?:scor(?:e|es|ed|ing)|rat(?:e|es|ed|ing)|grad(?:e|es|ed|ing))"
AWARD_VERB: Final = (
    r"(?:give|gives|gave|giving|given|assign(?:s|ed|ing)?|award(?:s|ed|ing)?|earn(?:s|ed|ing)?"
    r"|deserv(?:e|es|ed|ing)|merit(?:s|ed|ing)?|receiv(?:e|es|ed|ing)|get|gets|got|getting"
    rf"|warrant(?:s|ed|ing)?|result(?:s|ed|ing)?{SP}in)"
)
# "has a score of", "with a rating of": the reply holds the score
HAVING: Final = r"(?:ha(?:s|ve|d|ving)|with|hold(?:s|ing)?|carr(?:y|ies|ied|ying))"
NOUN: Final = r"(?:score|rating|grade|mark)"
# A word naming the metric or a quality ("fluency", "overall", "final"), not the scale's ends or a
# hypothetical: "a perfect score of 5" and "the highest rating of 5" describe the scale.
QUALIFIER: Final = (
    r"(?!(?:perfect|maximum|max|minimum|min|highest|lowest|possible|full|top|higher|lower|better|worse|same"
    r"|similar|different|previous|expected|required|target|reference|ideal|potential|average|mean|median"
    r"|human|gold|original|initial)\b)[a-z][a-z-]{1,24}"
)
# One word between an article and a fraction ("a solid 4 out of 5", "a well-deserved 8/10"), not one
# that makes it a threshold or a hypothetical ("a perfect 5/5", "a minimum 3 out of 5").
ADJECTIVE: Final = (
    r"(?!(?:perfect|maximum|max|minimum|min|possible|full|top|higher|lower|better|worse|required"
    r"|target|ideal|potential|average|mean|median|further|additional|extra|total)\b)[a-z][a-z-]{1,24}"
)
# A connective that states a result, then a score noun with up to three words before it: "resulting in a
# low relevance score of 2", "leading to a score of 3", "thus scoring a perfect fluency rating of 5",
# "making it a perfect relevance score of 5". A verb binds the noun, so the scale's ends are allowed
# here ("a perfect score of 5"); a word that negates, hedges or compares is not ("short of", "not",
# "nearly", "less than", "a lower score of 3").
RESULT_CONNECTIVE: Final = (
    rf"(?:result(?:s|ed|ing)?{SP}in|lead(?:s|ing)?{SP}to|led{SP}to|mak(?:e|es|ing){SP}(?:it|this)"
    rf"|(?:thus|hence|therefore|so){SP}(?:{SCORE_VERB}|earn(?:s|ed|ing)?|receiv(?:es|ed|ing)|get(?:s|ting)?)"
    rf"|yield(?:s|ed|ing)?|earn(?:s|ed|ing)?|deserv(?:es|ed|ing)|warrant(?:s|ed|ing)?|merit(?:s|ed|ing)?)"
)
RESULT_QUALIFIER: Final = (
    r"(?!(?:not|no|never|nearly|almost|close|near|approaching|short|less|more|under|over|above|below"
    r"|than|rather|instead|higher|lower|better|worse|same|similar|different|previous|expected|required"
    r"|target|reference|ideal|potential|possible|average|mean|median|human|gold|original|initial"
    r"|hypothetical|minimum|min|least|most|only|just|barely|hardly|of|to|the|an?|its|their)\b)"
    r"[a-z][a-z-]{1,24}"
)
# A noun naming a quality, as metrics are named: "relevance", "fluency", "coherence", "consistency",
# "accuracy", "helpfulness", "readability", "quality", "informativeness", "engagement".
METRIC_NOUN: Final = r"[a-z][a-z-]{1,24}(?:ness|ity|ence|ance|ency|ancy|acy|sion|tion|ment)"
