"""`judgeloop diff`: two runs judgement by judgement. Three pairs of runs of the paper's design that
differ in one thing each (the judge's model, the judge's prompt, the assess stage) are recorded with
a fake model whose replies depend on exactly what it is asked; the diff must blame every changed
judgement on that one thing, and its counts must equal a count made directly from the two runs'
recordings (each judge call's last attempt, its score read by hand)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.recordings import stage_reader
from pipeline.llm.types import ChatRequest
from pipeline.testing.judge_responder import experiment_responder
from pipeline.tools.cli import main
from tests.project import run_pipeline, write_data, write_params

SCORE = re.compile(r"Score: (\d)")


def _digest(*parts: str) -> int:
    return int(hashlib.sha256("|".join(parts).encode()).hexdigest()[:8], 16)


def responder(model: str) -> Callable[[ChatRequest], str]:
    """experiment_responder, made to depend on the model (the judge's scores move with it, the
    assessor's text does not), on the assess prompt's length (the first assessment says it), and
    answering a JSON schema in JSON."""

    def reply(request: ChatRequest) -> str:
        data = request.model_dump(mode="json")
        text = experiment_responder(data)
        first = next(m["content"] for m in data["messages"] if m["role"] == "user")
        if text.startswith("<assessment>") and "EVALUATION FEEDBACK" in first:
            return text  # a revision reads the same whatever the feedback said
        if text.startswith("<assessment>"):
            return text.replace("</assessment>", f" Asked in {len(first)} characters.</assessment>", 1)
        found = SCORE.search(text)
        if found and model.endswith("-b") and _digest(model, first) % 3 == 0:
            text = text.replace(found.group(0), f"Score: {int(found.group(1)) % 5 + 1}")
        if request.format is not None:
            found = SCORE.search(text)
            body: dict[str, Any] = {"explanation": text.split("\n")[0][:150]}
            return json.dumps({**body, "score": int(found.group(1))} if found else body)
        return text

    return reply


def record(
    root: Path,
    model: str,
    responder_of: Callable[[str], Callable[[ChatRequest], str]] = responder,
    **sections: dict[str, Any],
) -> Path:
    root.mkdir(parents=True)
    write_data(root)
    write_params(root, llm={"model": model}, **sections)
    run_pipeline(root, FakeBackend(responder_of(model), name=model))
    return root


def judged_scores(root: Path) -> dict[tuple[str, int, str], int | None]:
    """Each judge question's score as its last attempt's reply states it, straight from the recordings."""
    last: dict[tuple[str, int, str], tuple[int, str]] = {}
    for loaded in stage_reader.read_all(root / "recordings"):
        context = loaded.call.context
        metric = context.label("metric")
        if metric is None or context.step is None:
            continue
        key = (context.item, context.step, metric)
        if key not in last or context.attempt >= last[key][0]:
            last[key] = (context.attempt, loaded.call.record.reply.text)
    scores: dict[tuple[str, int, str], int | None] = {}
    for key, (_, text) in last.items():
        if text.lstrip().startswith("{"):
            scores[key] = json.loads(text).get("score")
        else:
            found = SCORE.search(text)
            scores[key] = int(found.group(1)) if found else None
    return scores


def changed_in_recordings(a: Path, b: Path) -> int:
    old, new = judged_scores(a), judged_scores(b)
    return sum(old[key] != new[key] for key in old.keys() & new.keys())


def diff_json(a: Path, b: Path, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["diff", str(a), str(b), "--json", "--design", "paper", *args])
    assert result.exit_code == 0, result.output
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def _all_blamed_on(found: dict[str, Any], cause: str, a: Path, b: Path) -> None:
    causes = {c["cause"] for c in found["changes"]}
    assert found["changes"], "the two runs should differ somewhere"
    assert causes == {cause}, [
        (c["item"], c["iteration"], c["metric"], c["cause"], c["detail"]) for c in found["changes"]
    ]
    total = sum(m["changed"] for m in found["metrics"])
    assert total == len(found["changes"]) == changed_in_recordings(a, b)
    assert sum(m["causes"].get(cause, 0) for m in found["metrics"]) == total


@pytest.fixture
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record(tmp_path_factory.mktemp("runs") / "a", "judge-a")


def test_a_new_judge_model_is_blamed_for_every_change(baseline: Path, tmp_path: Path) -> None:
    other = record(tmp_path / "b", "judge-b")
    found = diff_json(baseline, other)
    _all_blamed_on(found, "model", baseline, other)
    assert all(re.match(r"fake:judge-a\S* → fake:judge-b", c["detail"]) for c in found["changes"])


def test_a_new_judge_prompt_is_blamed_for_every_change(baseline: Path, tmp_path: Path) -> None:
    other = record(tmp_path / "b", "judge-a", judge={"output": "json"})
    found = diff_json(baseline, other)
    _all_blamed_on(found, "prompt", baseline, other)
    assert all(c["detail"].startswith("message 1 (user)") for c in found["changes"])


def test_a_changed_assess_stage_is_blamed_on_the_judged_input(baseline: Path, tmp_path: Path) -> None:
    other = record(tmp_path / "b", "judge-a", assess={"delimit_transcript": True})
    found = diff_json(baseline, other)
    _all_blamed_on(found, "input", baseline, other)


def test_a_run_against_itself_changes_nothing(baseline: Path) -> None:
    found = diff_json(baseline, baseline)
    assert found["changes"] == []
    for metric in found["metrics"]:
        assert metric["paired"] > 0 and metric["changed"] == 0
        for part in metric["rounds"]:
            assert part["exact_agreement"] == 1.0
            assert part["mean_difference"]["estimate"] == 0.0
            assert part["score_test"] is None  # every difference is zero: nothing to test
            assert part["repeat_noise"] is None  # nothing changed: nothing to set against noise


def test_the_text_fits_100_columns_and_counts_what_the_json_counts(baseline: Path, tmp_path: Path) -> None:
    other = record(tmp_path / "b", "judge-b")
    result = CliRunner().invoke(main, ["diff", str(baseline), str(other), "--design", "paper"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100
    found = diff_json(baseline, other)
    assert lines[2] == (
        f"{sum(m['paired'] for m in found['metrics'])} judgements paired, {len(found['changes'])} changed"
    )
    for metric in found["metrics"]:
        if not metric["changed"]:
            assert f"paper · {metric['metric']}: {metric['paired']} paired, none changed" in lines
        else:
            assert f"paper · {metric['metric']}" in lines
            assert f"  why: model {metric['changed']}" in lines
    assert "Wilcoxon signed-rank" in result.stdout
    # McNemar's where an item's verdict moved; none did here, and a test of nothing is not printed.
    parts = [part for m in found["metrics"] for part in m["rounds"]]
    assert ("exact McNemar" in result.stdout) == any(part["pass_test"] for part in parts)
    assert ("pass/fail: no item moved" in result.stdout) == any(
        part["pass_test"] is None and part["changed"] for part in parts
    )


def test_one_item_side_by_side(baseline: Path, tmp_path: Path) -> None:
    other = record(tmp_path / "b", "judge-a", judge={"output": "json"})
    change = diff_json(baseline, other)["changes"][0]
    result = CliRunner().invoke(
        main,
        [
            "diff",
            str(baseline),
            str(other),
            "--item",
            change["item"],
            "--metric",
            change["metric"],
            "--iteration",
            str(change["iteration"]),
        ],
    )
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert f"item {change['item']} · iteration {change['iteration']} · {change['metric']}" in text
    assert "why: prompt: message 1 (user)" in text
    assert "--- prompt (first ask)" in text and "--- reply (the one read)" in text
    assert re.search(r"^\+.*JSON", text, re.M | re.I)  # B's prompt asks for JSON: an added line
    missing = CliRunner().invoke(main, ["diff", str(baseline), str(other), "--item", "no-such-item"])
    assert missing.exit_code != 0 and "no judgement of item 'no-such-item'" in missing.output


def test_a_folder_that_is_not_a_run_is_named(tmp_path: Path, baseline: Path) -> None:
    result = CliRunner().invoke(main, ["diff", str(tmp_path), str(baseline)])
    assert result.exit_code != 0 and "holds no params.yaml" in result.output


def test_a_tampered_call_that_the_diff_uses_stops_it_naming_the_line(baseline: Path, tmp_path: Path) -> None:
    other = record(tmp_path / "b", "judge-b")
    change = diff_json(baseline, other)["changes"][0]
    key = change["b"]["keys"][-1]
    calls = other / "recordings" / "judge" / "calls.jsonl"
    lines = calls.read_text(encoding="utf-8").splitlines(keepends=True)
    number = next(i for i, line in enumerate(lines) if f'"key":"{key}"' in line)
    lines[number] = lines[number].replace("Score: ", "Score:  ", 1)
    calls.write_text("".join(lines), encoding="utf-8")
    result = CliRunner().invoke(main, ["diff", str(baseline), str(other), "--design", "paper"])
    assert result.exit_code != 0
    assert f"{calls}:{number + 1}: call {key} cannot be trusted" in result.output


def test_an_unknown_run_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.conftest import ROOT

    monkeypatch.chdir(ROOT)
    for name in ("no-such-run", "--output=x"):
        result = CliRunner().invoke(main, ["diff", "HEAD", "--", name])
        assert result.exit_code != 0 and f"no run named {name!r}" in result.output, result.output


def test_a_model_name_holding_a_line_break_cannot_print_a_line_of_its_own(
    baseline: Path, tmp_path: Path
) -> None:
    """The other run's recordings name its model: a name holding a newline printed a line of its
    own in the diff's text (here one that reads like the header's `B:` line). Each line of the
    text is one line, its line breaks shown as escapes (writers-red)."""
    other = record(tmp_path / "b", "judge\nB: forged\x1b[2J-b")
    result = CliRunner().invoke(main, ["diff", str(baseline), str(other), "--design", "paper"])
    assert result.exit_code == 0, result.output
    assert "changed" in result.output and "fake:judge\\nB: f" in result.output, result.output
    assert [line for line in result.output.splitlines() if line.startswith("B:")] == [f"B: {other}"]
    assert "\x1b" not in result.output


def opening_with(model: str, opening: str) -> Callable[[ChatRequest], str]:
    """responder, its judge replies opening with `opening` (its other replies as they are)."""
    plain = responder(model)

    def reply(request: ChatRequest) -> str:
        text = plain(request)
        return text if text.startswith("<assessment>") or request.format else f"{opening}{text}"

    return reply


def tabbed(model: str) -> Callable[[ChatRequest], str]:
    """responder, its judge replies holding a tab (a table, indented code: a model's own layout)."""
    return opening_with(model, "Reasons:\tbelow\n")


def test_a_tab_in_a_reply_is_shown_as_a_tab_as_audit_shows_it(baseline: Path, tmp_path: Path) -> None:
    """A tab cannot start a line of its own, so a reply line's tab stays a tab in `--item`'s diff, as
    `judgeloop audit` prints it (pipeline.llm.terminal.shown); only the line breaks inside one line
    of the text are escapes (a model name's, an item id's: the test above)."""
    other = record(tmp_path / "b", "judge-b", responder_of=tabbed)
    item = diff_json(baseline, other)["changes"][0]["item"]
    args = ["diff", str(baseline), str(other), "--design", "paper", "--item", item]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "+Reasons:\tbelow" in result.output.splitlines(), result.output
    assert "\\t" not in result.output
