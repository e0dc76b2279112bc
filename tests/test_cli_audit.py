"""`judgeloop audit`: the exact recorded prompts and replies, filtered, formatted and diffed."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.data.jsonl import read_jsonl
from pipeline.data.transcripts import load_transcripts
from pipeline.experiments.paper.params import load_paper_params
from pipeline.judges.rubric.judge import judge_prompt
from pipeline.judges.rubric.results import Assessment
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.terminal import framed
from pipeline.loops.results import Refinement
from pipeline.tools.cli import main
from tests.conftest import ROOT
from tests.project import MODEL, recorded_project, run_pipeline, scripted, write_params


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    recorded_project(tmp_path)
    return tmp_path


def audit(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["audit", *args])
    return result.exit_code, result.stdout, result.stderr


def jsonl(*args: str) -> list[dict[str, object]]:
    code, out, err = audit(*args, "--format", "jsonl")
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


def transcript_text(item: str) -> str:
    return {t.item_id: t for t in load_transcripts(load_paper_params().data)}[item].text


def test_the_judge_prompt_shown_is_exactly_the_one_sent(project: Path) -> None:
    before = {a.item: a for a in read_jsonl(Path("outputs/paper/assessments.jsonl"), Assessment)}["901"]
    expected = judge_prompt("completeness", transcript_text("901"), before.text)
    [call] = jsonl("--item", "901", "--iteration", "0", "--metric", "completeness")
    assert call["request"]["messages"] == [{"role": "user", "content": expected}]  # type: ignore[index]
    assert call["score"] == {"score": 2, "reason": "labelled", "matched": "Score: 2", "stated": 2}
    code, text, _ = audit("--item", "901", "--iteration", "0", "--metric", "completeness")
    assert code == 0
    assert framed(expected) in text  # each line behind the frame's margin, exactly as sent
    assert "--- score: 2 (labelled" in text
    assert "Score: 2" in text.split("--- reply ---")[1]


def test_a_later_iteration_shows_the_judge_prompt_of_the_regenerated_assessment(project: Path) -> None:
    refinements = read_jsonl(Path("outputs/paper/refinement.jsonl"), Refinement)
    [refinement] = [r for r in refinements if r.item == "902"]
    regenerated = refinement.iterations[1].assessment.text
    [call] = jsonl("--item", "902", "--iteration", "1", "--metric", "completeness", "--role", "judge")
    content = call["request"]["messages"][0]["content"]  # type: ignore[index]
    assert content == judge_prompt("completeness", transcript_text("902"), regenerated)
    assert call["context"]["stage"] == "refine"  # type: ignore[index]
    assert call["reply"]["text"] == refinement.iterations[1].metrics["completeness"].explanation  # type: ignore[index]


def test_filters_combine(project: Path) -> None:
    assert len(jsonl()) == 21  # 3 assessments, 12 judgements, 3 x (1 regeneration + 1 re-judged metric)
    assert len(jsonl("--stage", "judge")) == 12
    assert {c["context"]["item"] for c in jsonl("--item", "901", "--item", "903")} == {"901", "903"}  # type: ignore[index]
    assert len(jsonl("--role", "refine")) == 3
    assert len(jsonl("--metric", "accuracy")) == 3
    assert len(jsonl("--model", "FAKE0000")) == 21  # the digest, any case
    code, out, err = audit("--model", "other-model", "--format", "jsonl")
    assert (code, out) == (1, "")
    assert f"no recorded call matches --model other-model. The models recorded: {MODEL} " in err
    assert (
        len(jsonl("--search", "sleep frequency added")) == 6
    )  # 3 regenerations + 3 judge prompts quoting them
    assert len(jsonl("--stage", "judge", "--limit", "2")) == 2


def test_hit_and_miss_come_from_the_last_run(project: Path) -> None:
    assert len(jsonl("--miss")) == 21
    code, out, err = audit("--hit")
    assert (code, out) == (1, "")
    assert "no recorded call matches --hit. The last-run outcomes (hit, miss) recorded: miss." in err
    run_pipeline(project, FakeBackend(scripted, name=MODEL), stages=("judge",))  # every call now a hit
    assert len(jsonl("--hit")) == 12
    assert {c["context"]["stage"] for c in jsonl("--hit")} == {"judge"}  # type: ignore[index]


def test_a_filter_that_matches_nothing_fails_and_lists_the_values_there_are(project: Path) -> None:
    cases = {
        ("--item", "999"): "no recorded call matches --item 999. The items recorded: 901, 902, 903.",
        ("--item", "901", "--iteration", "7"): (
            "no recorded call matches --iteration 7 (of the calls of --item 901). "
            "The iterations recorded there: 0, 1."
        ),
        ("--stage", "judge", "--metric", "kindness"): (
            "no recorded call matches --metric kindness (of the calls of --stage judge). "
            "The metrics recorded there: accuracy, coherence, completeness, specificity."
        ),
        ("--role", "critic"): "The roles recorded: assess, judge, refine.",
        ("--label", "prompt=ids"): "no recorded call matches --label prompt=ids. The values of label prompt",
        ("--stage", "assess", "--search", "no such words"): (
            "no recorded call matches --search 'no such words' (of the calls of --stage assess): "
            "no prompt or reply contains it."
        ),
    }
    for args, expected in cases.items():
        code, out, err = audit(*args)
        assert (code, out) == (1, ""), args
        assert expected in " ".join(err.split()), (args, err)


def test_every_audit_example_in_the_readme_prints_at_least_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run in the checkout, on its committed recordings, as the README's reader does."""
    monkeypatch.chdir(ROOT)
    examples = [
        shlex.split(line.split("#")[0])[2:]
        for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("./judgeloop audit ")
    ]
    assert len(examples) >= 3
    for args in examples:
        code, out, err = audit(*args)
        assert code == 0, (args, err)
        shown = [line for line in out.splitlines() if line.startswith(("=== stage=", "### "))]
        assert shown, (args, out[:500])


def test_hit_and_miss_say_clearly_when_there_are_no_run_statistics(project: Path) -> None:
    shutil.rmtree(".judgeloop/runs")
    code, _, err = audit("--hit")
    assert code == 1
    assert "runs/<stage>.json" in err and "drop --hit/--miss" in err


def test_markdown_puts_each_message_and_reply_in_a_fence(project: Path) -> None:
    code, out, _ = audit("--item", "903", "--stage", "judge", "--metric", "coherence", "--format", "markdown")
    assert code == 0
    assert out.startswith("### stage=judge item=903 step=0 metric=coherence role=judge")
    assert out.count("```text\n") == 2
    assert "**score**: 4 (labelled" in out


def test_diff_between_iterations_shows_what_changed(project: Path) -> None:
    code, out, err = audit("diff", "901", "--from", "0", "--to", "1", "--metric", "completeness")
    assert code == 0, err
    sections = out.split("### ")
    titles = [s.splitlines()[0] for s in sections[1:]]
    assert titles == [
        "assessment prompt",
        "assessment reply",
        "judge completeness prompt",
        "judge completeness reply",
    ]
    assert "+EVALUATION FEEDBACK:" in out
    assert "-<PHQ8_symptoms>tired</PHQ8_symptoms>" in out
    assert "+<PHQ8_symptoms>tired nearly every day; sleep poor most nights</PHQ8_symptoms>" in out
    assert "-Score: 2\n" in out and "+Score: 4\n" in out


def test_diff_of_a_carried_over_metric_says_so(project: Path) -> None:
    code, out, _ = audit("diff", "901", "--from", "0", "--to", "1", "--metric", "coherence")
    assert code == 0
    assert "not re-judged at iteration 1" in out
    assert "### judge coherence reply\n(no change)" in out


def test_diff_names_the_recorded_iterations_when_one_is_missing(project: Path) -> None:
    code, _, err = audit("diff", "901", "--from", "0", "--to", "5")
    assert code == 1
    assert "iterations recorded: 0, 1" in err


def test_an_edited_record_is_shown_and_marked_untrusted(project: Path) -> None:
    calls = Path("recordings/judge/calls.jsonl")
    calls.write_text(calls.read_text().replace("Score: 4", "Score: 5", 1))
    code, out, _ = audit("--stage", "judge", "--search", "Score: 5")
    assert code == 0
    assert "UNTRUSTED: the checksum does not match" in out


def test_audit_needs_neither_the_model_nor_the_backend_that_made_the_calls(project: Path) -> None:
    # An Ollama server that is not there: audit reads files only.
    write_params(project, llm={"backend": "ollama", "model": "gemma3:27b", "base_url": "http://127.0.0.1:9"})
    assert len(jsonl("--stage", "assess")) == 3


def test_an_unknown_stage_is_a_clear_error(project: Path) -> None:
    code, _, err = audit("--stage", "jduge")
    assert code == 1
    assert "no recordings for stage(s) jduge" in err and "recorded: assess, judge, refine" in err


def test_version() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0 and result.stdout.startswith("judgeloop, version ")


def _report_files() -> dict[str, bytes]:
    folder = Path("outputs/paper")
    pages = [folder / "report.md", folder / "report.html", *sorted((folder / "report").iterdir())]
    return {str(p): p.read_bytes() for p in pages}


def test_report_writes_the_pages_the_aggregate_stage_writes(project: Path) -> None:
    pytest.importorskip("pipeline.experiments.paper.report.html")  # the other commands do not need it
    from stages.runner import main as stage

    staged = CliRunner().invoke(stage, ["paper", "aggregate"])
    assert staged.exit_code == 0, staged.output
    by_stage = _report_files()
    assert len(by_stage) == 5
    for path in by_stage:
        Path(path).unlink()
    result = CliRunner().invoke(main, ["report", "paper"])
    assert result.exit_code == 0, result.output
    written = "outputs/paper/report.md, outputs/paper/report.html, outputs/paper/report/item-901.html"
    assert f"paper: wrote {written}" in result.stdout
    assert _report_files() == by_stage
    # With no design named, every design with a report: those whose outputs are missing say so.
    every = CliRunner().invoke(main, ["report"])
    assert every.exit_code == 0, every.output
    assert "paper: wrote" in every.stdout and "rag: no report" in every.stderr
