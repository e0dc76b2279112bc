"""One design at a time (issue 32, item 2): a design's own llm (llm_overrides) reaches its stages
alone, so DVC finds only that design's stages out of date; --design and a design's name pick its
stages; a replay that misses says whether the stage never ran under these params."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import click
import pytest
import yaml

from pipeline.errors import ReplayIncompleteError, ReplayMissError
from pipeline.experiments.registry import load_design
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.types import CallContext, ChatRequest, Message, Options
from pipeline.tools.design_targets import check_design, expand_designs
from pipeline.tools.set_params import check_set_params
from tests.conftest import ROOT
from tests.helpers import make_session


def _params(tmp_path: Path, overrides: dict[str, object]) -> Path:
    raw = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    raw["llm_overrides"]["paper"] = overrides
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


def test_a_designs_override_reaches_its_stages_alone(tmp_path: Path) -> None:
    path = _params(tmp_path, {"backend": "ollama", "model": "gemma3:27b", "options": {"num_ctx": 8192}})
    paper = load_design("paper").load_params(path, environ={})
    rag = load_design("rag").load_params(path, environ={})
    assert (paper.llm.backend, paper.llm.model, paper.llm.options.num_ctx) == ("ollama", "gemma3:27b", 8192)
    assert paper.llm.options.num_predict == rag.llm.options.num_predict  # the rest is llm's
    assert (rag.llm.backend, rag.llm.model) == ("embedded", "SmolLM2-135M-Instruct.Q4_1")
    empty = load_design("paper").load_params(_params(tmp_path, {"backend": None, "model": None}), environ={})
    assert empty.llm == rag.llm  # the committed params.yaml's empty entries: llm's own values


def test_design_names_pick_their_stages_and_unknown_keys_are_refused() -> None:
    assert expand_designs(["paper"]) == ["assess", "judge", "refine", "aggregate"]
    assert expand_designs(["rag_judge"], "paper") == ["assess", "judge", "refine", "aggregate", "rag_judge"]
    with pytest.raises(click.ClickException, match="did you mean 'paper'"):
        check_design("papr")
    with pytest.raises(click.ClickException, match=r"did you mean 'refine\.threshold'"):
        check_set_params(["-S", "refine.treshold=4"])
    check_set_params(["-S", "refine.threshold=4", "-S", "llm_overrides.paper.model=gemma3:27b"])
    with pytest.raises(click.ClickException, match="no key 'modle'"):
        check_set_params(["-S", "llm_overrides.paper.modle=x"])


def test_a_replay_miss_says_the_stage_never_ran_under_this_model(tmp_path: Path) -> None:
    request = ChatRequest(messages=(Message(role="user", content="hi"),), options=Options())
    context = CallContext(stage="judge", item="1")
    session, _ = make_session(tmp_path, stage="judge", backend=FakeBackend(name="model-a"))
    session.chat(request, context)
    session.close()
    for model, cause in (("model-b", "never ran under these params"), ("model-a", "these calls are new")):
        replay, _ = make_session(tmp_path, "replay", stage="judge", backend=FakeBackend(name=model))
        with pytest.raises(ReplayMissError):
            replay.chat(
                request.model_copy(update={"messages": (Message(role="user", content="new"),)}), context
            )
        with pytest.raises(ReplayIncompleteError, match=cause) as raised:
            replay.raise_for_misses()
        assert "fake:model-a" in raised.value.message or model == "model-a"


@pytest.mark.slow
def test_with_the_papers_llm_overridden_dvc_finds_the_other_designs_up_to_date(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    for name in ("pipeline", "stages", "data", "recordings", "outputs"):
        shutil.copytree(ROOT / name, project / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("dvc.yaml", "dvc.lock", ".dvcignore"):
        shutil.copy(ROOT / name, project / name)
    (project / ".dvc").mkdir()
    shutil.copy(ROOT / ".dvc" / "config", project / ".dvc" / "config")
    shutil.copy(_params(tmp_path, {"backend": "ollama", "model": "gemma3:27b"}), project / "params.yaml")
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    from dvc.repo import Repo

    with Repo(str(project)) as repo:
        changed = {name.rpartition(":")[2]: why for name, why in repo.status().items()}
    paper = {s.name for s in load_design("paper").stages}
    assert changed, "the paper's stages depend on their override"
    assert set(changed) <= paper, f"other designs out of date: {sorted(set(changed) - paper)}"
    for stage in ("assess", "judge", "refine"):
        assert "llm_overrides.paper" in str(changed[stage]), changed[stage]


def test_the_real_model_preset_sets_known_keys_in_one_command() -> None:
    from pipeline.tools.dvc_run import preset_args

    args = preset_args(ROOT / "presets" / "real-model.yaml")
    at = args.index("++judge.output='text'")  # a quoted text, added where params.yaml lacks it
    assert args[at - 1] == "-S"
    assert "-S" in args and "++assess.output='text'" in args
    check_set_params(args)  # every key of the preset is one params.yaml has


def test_exp_list_says_when_there_is_no_experiment(monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline.tools.exp_list import changed_params, render_list

    monkeypatch.chdir(ROOT)
    shown = render_list()
    assert shown.startswith(("no experiments", "experiment "))
    old = {"params.yaml": {"refine": {"threshold": 3, "keep": "last"}}}
    new = {"params.yaml": {"refine": {"threshold": 2, "keep": "last"}}}
    assert changed_params(old, new) == ["refine.threshold=2"]
