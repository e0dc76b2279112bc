"""A design judgeloop has never seen gets `judgeloop diff` from its registry entry alone: its
`judgements=` hook, and no code of its in pipeline/tools/. The design here is registered for the
test (the registry's references, as an entry point would add it), rates texts 1-5 in one call each,
and is recorded by a fake model in two runs whose judge prompts differ."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from pydantic import Field

from pipeline.data.jsonl import Result, read_jsonl, write_jsonl
from pipeline.experiments import registry
from pipeline.experiments.design import Design, Stage
from pipeline.experiments.judgements import Judgement, RunFiles
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.session import open_session
from pipeline.llm.settings import EngineSettings, Section
from pipeline.llm.types import CallContext, ChatRequest, Message
from pipeline.tools.cli import main

TEXTS = {"t1": "short", "t2": "a somewhat longer text", "t3": "the longest text of the three, by far"}


class ConciseSettings(Section):
    out: str = "outputs/concise/judgements.jsonl"
    prompt: str = "Rate how concise this text is, 1-5."


class ConciseParams(EngineSettings):
    concise: ConciseSettings = Field(default_factory=ConciseSettings)


class Rated(Result):
    item: str
    score: int | None
    call_keys: tuple[str, ...]


def judgements(params: ConciseParams, run: RunFiles) -> Iterator[Judgement]:
    for row in read_jsonl(run.path(params.concise.out), Rated):
        yield Judgement("concise", row.item, 0, "concision", row.score, None, row.call_keys)


DESIGN = Design(
    name="concise",
    title="how concise a text is",
    params=ConciseParams,
    stages=(Stage("concise_judge", run="tests.test_diff_new_design:STEP", outs=("${concise.out}",)),),
    judgements="tests.test_diff_new_design:judgements",
)


def reply(request: ChatRequest) -> str:
    prompt = request.messages[0].content
    return str(1 + len(prompt) % 5)


def run(root: Path, prompt: str) -> Path:
    root.mkdir()
    (root / "params.yaml").write_text(
        yaml.safe_dump({"llm": {"backend": "fake"}, "concise": {"prompt": prompt}})
    )
    params = ConciseParams.model_validate(yaml.safe_load((root / "params.yaml").read_text()))
    session = open_session(params, "concise_judge", root=root, backend_factory=lambda: FakeBackend(reply))
    rows = []
    for item, text in TEXTS.items():
        request = ChatRequest(messages=(Message(role="user", content=f"{prompt}\n\n{text}"),))
        call = session.chat(request, CallContext(stage="concise_judge", item=item, step=0))
        rows.append(Rated(item=item, score=int(call.record.reply.text), call_keys=(call.record.key,)))
    session.close()
    write_jsonl(root / params.concise.out, rows)
    return root


def test_a_new_design_gets_diff_from_its_registry_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refs = {**registry.design_refs(), "concise": "tests.test_diff_new_design:DESIGN"}
    monkeypatch.setattr(registry, "design_refs", lambda: refs)
    a = run(tmp_path / "a", "Rate how concise this text is, 1-5.")
    b = run(tmp_path / "b", "Rate how concise this text is, from 1 (rambling) to 5 (tight).")
    result = CliRunner().invoke(main, ["diff", str(a), str(b), "--design", "concise", "--json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert [(m["design"], m["metric"], m["paired"]) for m in found["metrics"]] == [
        ("concise", "concision", 3)
    ]
    scores = {
        side: {r.item: r.score for r in read_jsonl(root / "outputs/concise/judgements.jsonl", Rated)}
        for side, root in (("a", a), ("b", b))
    }
    changed = sorted(item for item in TEXTS if scores["a"][item] != scores["b"][item])
    assert changed and sorted(c["item"] for c in found["changes"]) == changed
    assert {c["cause"] for c in found["changes"]} == {"prompt"}
    assert all(c["detail"] == "message 1 (user): +1 −1 lines" for c in found["changes"])
