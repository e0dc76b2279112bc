"""Small builders shared by the tests."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

from pipeline.data.jsonl import write_jsonl
from pipeline.data.transcripts import load_transcripts
from pipeline.experiments.paper.assess import run_assess
from pipeline.experiments.paper.judge import run_judge
from pipeline.experiments.paper.params import PaperParams
from pipeline.experiments.paper.refine import run_refine
from pipeline.llm.backends.fake import FakeBackend, Responder, echo_responder
from pipeline.llm.session import LLMSession, open_session
from pipeline.llm.settings import CacheMode
from pipeline.llm.types import ChatRequest, Message, Options
from pipeline.testing.sessions import folder_session


def make_session(
    root: Path,
    mode: CacheMode = "auto",
    *,
    stage: str = "judge",
    backend: FakeBackend | None = None,
    responder: Responder = echo_responder,
) -> tuple[LLMSession, FakeBackend]:
    fake = backend or FakeBackend(responder)
    return folder_session(root, fake, stage=stage, mode=mode, runs=True), fake


def request(text: str, **options: object) -> ChatRequest:
    return ChatRequest(
        messages=(Message(role="user", content=text),), options=Options.model_validate(options)
    )


def run_experiment(params: PaperParams, root: Path) -> dict[str, bytes]:
    """assess → judge → refine in-process, as the stages do, returning the outputs' bytes."""
    outputs: dict[str, bytes] = {}
    transcripts = load_transcripts(params.data, root)
    by_id = {t.item_id: t for t in transcripts}
    with closing(open_session(params, "assess", root=root)) as session:
        assessments = run_assess(params, session, transcripts)
    with closing(open_session(params, "judge", root=root)) as session:
        judgements = run_judge(params, session, by_id, assessments)
    with closing(open_session(params, "refine", root=root)) as session:
        refinements = run_refine(params, session, by_id, {a.item: a for a in assessments}, judgements)
    for name, results in (("assess", assessments), ("judge", judgements), ("refine", refinements)):
        write_jsonl(root / "outputs" / f"{name}.jsonl", results)
        outputs[f"outputs/{name}.jsonl"] = (root / "outputs" / f"{name}.jsonl").read_bytes()
    for path in sorted((root / params.cache.recordings).rglob("*.jsonl")):
        outputs[str(path.relative_to(root))] = path.read_bytes()
    return outputs
