"""The judge stage reads prose verdicts without a re-ask, applies judge.decimal_scores (unscored, round
or keep) to what the extractor read, and the aggregate counts how every score was read (metrics.json
"readings")."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest

from pipeline.data.transcripts import Transcript, Turn
from pipeline.experiments.paper.aggregation import compute_metrics
from pipeline.judges.rubric.judge import judge_metric
from pipeline.judges.rubric.results import Assessment, MetricJudgement
from pipeline.judges.rubric.settings import JudgeSettings
from pipeline.judges.scores import DECIMAL_POLICIES
from pipeline.llm.types import CallContext, ChatRequest, Options
from pipeline.loops.results import Iteration, Refinement
from tests.helpers import make_session

TRANSCRIPT = Transcript(
    item_id="301",
    turns=(Turn(speaker="Ellie", text="how are you sleeping"), Turn(speaker="Participant", text="badly")),
    source="301.csv",
)


def _judge(tmp_path: Path, first_reply: str, settings: JudgeSettings) -> tuple[MetricJudgement, int]:
    def respond(request: ChatRequest) -> str:
        return first_reply if len(request.messages) == 1 else "Explanation: as above.\nScore: 2"

    session, fake = make_session(tmp_path, mode="off", responder=respond)
    judged = judge_metric(
        session,
        TRANSCRIPT,
        "<assessment>poor sleep</assessment>",
        "coherence",
        settings,
        Options(),
        CallContext(stage="judge", item="301"),
    )
    return judged, len(fake.calls)


@pytest.mark.parametrize(
    ("reply", "score", "reading"),
    [
        ("The summary misses the duration, resulting in a score of 3.", 3, "verdict_clause"),
        ("It is accurate throughout. I'd rate this summary 4.", 4, "verdict_verb"),
        ("Well organised: a coherence rating of 5.", 5, "verdict_named"),
    ],
)
def test_a_prose_verdict_is_read_on_the_first_ask(
    tmp_path: Path, reply: str, score: int, reading: str
) -> None:
    judged, calls = _judge(tmp_path, reply, JudgeSettings(max_attempts=2))
    assert (judged.score, judged.reading, calls) == (score, reading, 1)


def test_a_decimal_is_unscored_and_re_asked_by_default(tmp_path: Path) -> None:
    judged, calls = _judge(tmp_path, "Explanation: fine.\nScore: 3.5/5", JudgeSettings(max_attempts=2))
    assert (judged.score, judged.reading, calls) == (2, "labelled", 2)  # the re-ask's answer
    judged, calls = _judge(tmp_path / "once", "Score: 3.5/5", JudgeSettings(max_attempts=1))
    assert (judged.score, judged.reading, calls) == (None, "non_integer", 1)


def test_a_decimal_is_rounded_and_flagged_when_asked(tmp_path: Path) -> None:
    settings = JudgeSettings(max_attempts=2, decimal_scores="round")
    judged, calls = _judge(tmp_path, "Explanation: fine.\nScore: 3.5/5", settings)
    assert (judged.score, judged.reading, calls) == (4, "decimal_rounded", 1)


def test_a_decimal_is_kept_as_stated_when_asked(tmp_path: Path) -> None:
    settings = JudgeSettings(max_attempts=2, decimal_scores="keep")
    reply = "The summary misses the duration, so I would grade this reply as 3.5 out of 5."
    judged, calls = _judge(tmp_path, reply, settings)
    assert (judged.score, judged.reading, calls) == (3.5, "decimal_kept", 1)
    assert MetricJudgement.model_validate_json(judged.model_dump_json()) == judged  # a float round-trips


def test_the_policy_only_changes_what_is_recorded_not_what_is_read(tmp_path: Path) -> None:
    policies: tuple[typing.Literal["unscored", "round", "keep"], ...] = ("unscored", "round", "keep")
    recorded = {
        policy: _judge(
            tmp_path / policy, "Score: 3.5/5", JudgeSettings(max_attempts=1, decimal_scores=policy)
        )[0]
        for policy in policies
    }
    assert {p: (j.score, j.reading) for p, j in recorded.items()} == {
        "unscored": (None, "non_integer"),
        "round": (4, "decimal_rounded"),
        "keep": (3.5, "decimal_kept"),
    }
    assert len({j.explanation for j in recorded.values()}) == 1  # the same reply, read the same


def test_judge_decimal_scores_are_the_extractors_policies() -> None:
    annotation = JudgeSettings.model_fields["decimal_scores"].annotation
    assert typing.get_args(annotation) == DECIMAL_POLICIES


def test_judge_decimal_scores_takes_no_other_value() -> None:
    with pytest.raises(ValueError, match="decimal_scores"):
        JudgeSettings.model_validate({"decimal_scores": "truncate"})


def _metric(score: float | None, reading: str, carried_over: bool = False) -> MetricJudgement:
    return MetricJudgement(
        metric="coherence",
        score=score,
        reading=reading,
        explanation="",
        call_keys=("k",),
        carried_over=carried_over,
    )


def test_metrics_count_how_every_score_was_read() -> None:
    assessment = Assessment(item="1", text="", sections=None, valid=True, call_keys=("a",))
    iterations = (
        Iteration(
            iteration=0,
            assessment=assessment,
            metrics={"coherence": _metric(4, "decimal_rounded")},
            low_metrics=(),
        ),
        Iteration(
            iteration=1,
            assessment=assessment,
            metrics={"coherence": _metric(4, "decimal_rounded", carried_over=True)},  # not judged again
            low_metrics=(),
        ),
    )
    refinements = [
        Refinement(item="1", iterations=iterations, stop_reason="passed", kept=1),
        Refinement(
            item="2",
            iterations=(
                Iteration(
                    iteration=0,
                    assessment=assessment,
                    metrics={"coherence": _metric(None, "non_integer")},
                    low_metrics=(),
                ),
            ),
            stop_reason="max_iterations",
            kept=0,
        ),
    ]
    refinements.append(
        Refinement(
            item="3",
            iterations=(
                Iteration(
                    iteration=0,
                    assessment=assessment,
                    metrics={"coherence": _metric(3.5, "decimal_kept")},
                    low_metrics=(),
                ),
            ),
            stop_reason="passed",
            kept=0,
        )
    )
    summary = compute_metrics(refinements, ("coherence",))
    assert summary["readings"] == {"decimal_kept": 1, "decimal_rounded": 1, "non_integer": 1}
    # a kept decimal is in the means; the unscored one is counted beside them
    assert summary["figure2"]["coherence"]["before"] == {"mean": 3.75, "sd": 0.3536, "n": 2, "unscored": 1}
