"""`judgeloop status`: the model calls the next run makes, predicted from the records, checked
against a real run with the same fake model."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pipeline.experiments.params import load_params
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.cache.store import CallStore
from pipeline.llm.keys import KEY_PREFIX
from pipeline.llm.session import RecordingIndex
from pipeline.llm.types import CallContext
from pipeline.tools.cli import main
from pipeline.tools.status import command as status_command
from pipeline.tools.status.command import NOT_LOOKED_UP
from pipeline.tools.status.dvc_state import DvcView
from pipeline.tools.status.identities import recorded_identity
from tests.conftest import ROOT
from tests.helpers import make_session, request
from tests.project import MODEL, ONE_ROUND, recorded_project, run_pipeline, scripted, write_data, write_params

# One regeneration at most, and a judge asked once: a new judge call is then the last its item makes.
RECORDED = ONE_ROUND


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    recorded_project(tmp_path, params=RECORDED)
    return tmp_path


def change(**sections: dict[str, Any]) -> None:
    merged = {name: dict(values) for name, values in RECORDED.items()}
    for name, values in sections.items():
        merged[name] = {**merged.get(name, {}), **values}
    write_params(Path("."), **merged)


def status(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["status", "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def per_stage(prediction: dict[str, Any], key: str) -> dict[str, Any]:
    return {s["stage"]: s.get(key) for s in prediction["stages"]}


def run_for_real(root: Path) -> dict[str, int]:
    return run_pipeline(root, FakeBackend(scripted, name=MODEL))


def test_an_unchanged_experiment_replays_offline(project: Path) -> None:
    prediction = status("--all")
    assert per_stage(prediction, "model_calls") == {"assess": 0, "judge": 0, "refine": 0, "aggregate": None}
    assert per_stage(prediction, "calls") == {"assess": 3, "judge": 12, "refine": 6, "aggregate": None}
    assert prediction["exact"] and prediction["offline_replay_ok"]
    assert prediction["summary"] == "the next `dvc repro` needs 0 model calls: an offline replay will succeed"
    assert prediction["identity"] == {"backend": "fake", "name": MODEL, "digest": "sha256:fake0000"}


def test_a_threshold_that_changes_no_decision_costs_no_model_call(project: Path) -> None:
    change(refine={"threshold": 2})  # completeness scored 2 still triggers; everything else scored 4
    prediction = status("--all")
    assert (prediction["model_calls"], prediction["exact"]) == (0, True)
    assert run_for_real(project) == {"assess": 0, "judge": 0, "refine": 0}


def test_new_calls_that_end_their_items_are_predicted_exactly(project: Path) -> None:
    change(refine={"rejudge": "all"})  # iteration 1 now re-judges the three metrics that passed
    prediction = status("--all")
    assert per_stage(prediction, "model_calls") == {"assess": 0, "judge": 0, "refine": 9, "aggregate": None}
    assert (prediction["model_calls"], prediction["exact"]) == (9, True)
    assert prediction["summary"] == "the next `dvc repro` needs 9 model call(s)"
    [refine] = [s for s in prediction["stages"] if s["stage"] == "refine"]
    new = {
        (c["context"]["item"], c["context"]["step"], c["context"]["labels"]["metric"])
        for c in refine["new_calls"]
    }
    assert new == {(i, 1, m) for i in ("901", "902", "903") for m in ("coherence", "specificity", "accuracy")}
    assert run_for_real(project) == {"assess": 0, "judge": 0, "refine": 9}


def test_a_loop_that_decides_on_an_unknown_reply_is_a_lower_bound(project: Path) -> None:
    # With unscored_triggers false, refine lets an unscored metric pass without sending it back
    # (its LLMStep says so: decides_on_unknown), so a placeholder reply may stop a loop a real one
    # would not: the same 9 new calls as above, but no longer exact.
    change(refine={"rejudge": "all", "unscored_triggers": False})
    prediction = status("--all")
    assert per_stage(prediction, "model_calls")["refine"] == 9
    exact = per_stage(prediction, "exact")
    assert exact == {"assess": True, "judge": True, "refine": False, "aggregate": True}


def test_a_judge_change_is_exact_for_the_judge_and_a_lower_bound_after_it(project: Path) -> None:
    change(judge={"num_predict": 100})  # every judge call has a new key
    prediction = status("--all")
    assert per_stage(prediction, "model_calls") == {"assess": 0, "judge": 12, "refine": 0, "aggregate": None}
    assert per_stage(prediction, "exact") == {
        "assess": True,
        "judge": True,
        "refine": False,
        "aggregate": True,  # it makes no call
    }
    assert per_stage(prediction, "unpredictable_items")["refine"] == ["901", "902", "903"]
    assert prediction["summary"] == "the next `dvc repro` needs at least 12 model call(s)"
    real = run_for_real(project)
    assert real["judge"] == 12
    assert sum(real.values()) >= 12


def test_an_item_stopped_by_an_unknown_reply_gives_a_lower_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    recorded_project(tmp_path)  # assess.max_attempts 2: a new assessment may be re-asked
    write_params(tmp_path, refine={"threshold": 4})  # every metric now triggers: new regeneration prompts
    prediction = status("--all")
    [refine] = [s for s in prediction["stages"] if s["stage"] == "refine"]
    assert (refine["model_calls"], refine["exact"], refine["stopped_items"]) == (
        3,
        False,
        ["901", "902", "903"],
    )
    assert run_for_real(tmp_path)["refine"] >= 3


def test_the_text_report_and_its_list_of_new_calls(project: Path) -> None:
    change(refine={"rejudge": "all"})
    result = CliRunner().invoke(main, ["status", "--all", "-v"])
    assert result.exit_code == 0
    out = result.stdout
    assert "model: fake scripted-judge sha256:fake0000 (asked the backend, as the next run will)" in out
    assert "15 calls: 6 recorded, 9 to the model (exact)" in out
    assert "new: stage=refine item=902 step=1 metric=accuracy role=judge key " + KEY_PREFIX in out
    assert out.endswith("the next `dvc repro` needs 9 model call(s)\n")


def test_status_writes_nothing(project: Path) -> None:
    change(refine={"rejudge": "all"})

    def snapshot() -> dict[str, bytes]:
        # The cache's SQLite files are left out: opening a database may touch its journal.
        return {
            str(p): p.read_bytes()
            for p in project.rglob("*")
            if p.is_file() and ".judgeloop/cache" not in str(p)
        }

    before, entries = snapshot(), len(CallStore(project / ".judgeloop/cache"))
    status("--all")
    assert snapshot() == before
    assert len(CallStore(project / ".judgeloop/cache")) == entries


def test_without_dvc_every_stage_is_assumed_out_of_date(project: Path) -> None:
    prediction = status()
    assert prediction["stages_from"] == "every stage (not a DVC project)"
    assert per_stage(prediction, "runs") == {"assess": True, "judge": True, "refine": True, "aggregate": True}


def test_replay_mode_says_the_run_would_fail(project: Path) -> None:
    change(cache={"mode": "replay"}, refine={"rejudge": "all"})
    prediction = status("--all")
    assert prediction["identity_source"] == "llm.digest or the recordings, as replay mode"
    assert (
        prediction["summary"]
        == "the next `dvc repro` (cache.mode replay) will fail: 9 call(s) are not recorded"
    )


def test_offline_takes_the_recorded_identity(project: Path) -> None:
    prediction = status("--all", "--offline")
    assert prediction["identity_source"] == "llm.digest or the recordings (--offline)"
    assert prediction["identity"]["digest"] == "sha256:fake0000" and prediction["offline_replay_ok"]


def dvc_says(monkeypatch: pytest.MonkeyPatch, changed: dict[str, str]) -> None:
    """`dvc status` as DVC would answer it in a project of the paper's four stages."""
    graph = {"assess": (), "judge": ("assess",), "refine": ("judge",), "aggregate": ("refine",)}
    monkeypatch.setattr(status_command, "dvc_view", lambda: DvcView(changed, "dvc status", graph))


def test_an_up_to_date_project_looks_up_no_identity(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 33: with every stage up to date, no recording is read for the model's identity (with
    --offline, finding it reads every stage's recording, which grows with the run)."""
    dvc_says(monkeypatch, {})

    def read(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a recording read for the identity")

    monkeypatch.setattr(RecordingIndex, "identities", read)
    prediction = status("--offline")
    assert (prediction["identity"], prediction["identity_source"]) == (None, NOT_LOOKED_UP)
    assert per_stage(prediction, "runs") == dict.fromkeys(("assess", "judge", "refine", "aggregate"), False)
    assert prediction["offline_replay_ok"]
    text = CliRunner().invoke(main, ["status", "--offline"]).stdout
    assert text.startswith(f"model: ({NOT_LOOKED_UP})\n")


def test_a_stage_that_runs_looks_up_the_identity(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dvc_says(monkeypatch, {"refine": "changed params"})
    prediction = status("--offline")
    assert prediction["identity"]["digest"] == "sha256:fake0000"
    assert prediction["identity_source"] == "llm.digest or the recordings (--offline)"
    assert per_stage(prediction, "runs") == {
        "assess": False,
        "judge": False,
        "refine": True,
        "aggregate": False,  # refine's output is the same bytes
    }
    assert (per_stage(prediction, "model_calls")["refine"], prediction["exact"]) == (0, True)


def test_an_unknown_identity_still_fails_the_status(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dvc_says(monkeypatch, {"judge": "changed params"})
    change(cache={"mode": "replay"}, llm={"model": "no-such-model"})
    result = CliRunner().invoke(main, ["status", "--json"])
    assert result.exit_code != 0 and "no recorded call was made by" in result.output


class EmbeddedLike(FakeBackend):
    kind = "embedded"


def test_an_embedded_identity_from_the_records_takes_todays_runner_settings(tmp_path: Path) -> None:
    fake = EmbeddedLike(name="SmolLM2", digest="sha256:gguf;n_ctx=4096;n_threads=2;n_batch=512")
    session, _ = make_session(tmp_path, backend=fake)
    session.chat(request("hello"), CallContext(stage="judge"))
    session.close()
    params = load_params(tmp_path / "absent.yaml").model_copy(deep=True)
    llm = params.llm.model_copy(
        update={
            "backend": "embedded",
            "model": "SmolLM2",
            "options": params.llm.options.model_copy(update={"num_ctx": 8192}),
        }
    )
    identity = recorded_identity(
        params.model_copy(update={"llm": llm}), RecordingIndex(tmp_path / "recordings")
    )
    assert identity.digest == "sha256:gguf;n_ctx=8192;n_threads=2;n_batch=512"


DVC_YAML = """\
stages:
  assess:
    cmd: {python} -m stages paper assess
    deps: [data]
    params: [data, assess, llm]
    outs:
      - outputs/paper/assessments.jsonl: {{cache: false}}
      - recordings/assess: {{cache: false, persist: true}}
  judge:
    cmd: {python} -m stages paper judge
    deps: [outputs/paper/assessments.jsonl, data]
    params: [data, judge, llm]
    outs:
      - outputs/paper/judgements.jsonl: {{cache: false}}
      - recordings/judge: {{cache: false, persist: true}}
  refine:
    cmd: {python} -m stages paper refine
    deps: [outputs/paper/assessments.jsonl, outputs/paper/judgements.jsonl, data]
    params: [data, refine, assess, judge, llm]
    outs:
      - outputs/paper/refinement.jsonl: {{cache: false}}
      - recordings/refine: {{cache: false, persist: true}}
"""


def dvc(*args: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "dvc", *args], check=True, env=env, capture_output=True)


def last_runs() -> dict[str, dict[str, Any]]:
    return {
        s: json.loads(Path(f".judgeloop/runs/{s}.json").read_text()) for s in ("assess", "judge", "refine")
    }


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("dvc") is None, reason="needs DVC")
def test_status_predicts_what_dvc_repro_then_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end: real `dvc repro` runs (the stages' own fake backend), status in between."""
    monkeypatch.chdir(tmp_path)
    write_data(tmp_path, ("901", "902"))
    change()
    Path("dvc.yaml").write_text(DVC_YAML.format(python=sys.executable))
    dvc("init", "--no-scm", "-q")
    dvc("repro")

    change(refine={"threshold": 2})
    prediction = status()
    assert prediction["stages_from"] == "dvc status"
    # The stages of this project's dvc.yaml, and only those (no aggregate, no other design here).
    assert {s["stage"]: s["runs"] for s in prediction["stages"]} == {
        "assess": False,
        "judge": False,
        "refine": True,
    }
    assert (prediction["model_calls"], prediction["exact"]) == (0, True)
    predicted_refine = per_stage(prediction, "calls")["refine"]
    assess_before = Path(".judgeloop/runs/assess.json").read_bytes()
    dvc("repro")
    runs = last_runs()
    assert (runs["refine"]["hits"], runs["refine"]["model_calls"]) == (predicted_refine, 0)
    assert Path(".judgeloop/runs/assess.json").read_bytes() == assess_before  # DVC skipped assess

    change(refine={"threshold": 2}, judge={"num_predict": 100})
    prediction = status()
    assert per_stage(prediction, "model_calls")["judge"] == 8 and per_stage(prediction, "exact")["judge"]
    assert not prediction["exact"] and prediction["model_calls"] == 8
    dvc("repro")
    runs = last_runs()
    assert runs["judge"]["model_calls"] == 8
    assert runs["judge"]["model_calls"] + runs["refine"]["model_calls"] >= prediction["model_calls"]


def test_a_model_name_holding_a_line_break_cannot_print_a_line_of_its_own(project: Path) -> None:
    """The model's name is the server's (its model listing): a newline in it printed a line of its
    own in the text report, one that reads like the report's own. Each line is one line, line
    breaks and controls shown as escapes (writers-red)."""
    change(llm={"model": "scripted-judge\nthe next `dvc repro` needs 0 model call(s)\x1b[2J"})
    result = CliRunner().invoke(main, ["status", "--all"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "model: fake scripted-judge\\nthe next" in out, out
    assert [line for line in out.splitlines() if line.startswith("the next")] == [out.splitlines()[-1]], out
    assert "\x1b" not in out
