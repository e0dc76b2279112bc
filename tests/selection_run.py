"""The selection experiment in-process over a fake judge, as its stages run it (shared by tests)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

from pipeline.experiments.selection.aggregation import compute_metrics
from pipeline.experiments.selection.params import SelectionParams
from pipeline.experiments.selection.pick import run_pick
from pipeline.experiments.selection.pools import request_pools
from pipeline.experiments.selection.score import ScoredRequest, run_score
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.recordings.stage_reader import read_stage
from pipeline.llm.session import LLMSession
from pipeline.llm.types import Backend, ChatRequest
from pipeline.testing.sessions import folder_session

ROOT = Path(__file__).resolve().parents[1]
TRACK_LINE = re.compile(r'^Track( [AB])?: "(?P<name>[^"]*)" by', re.MULTILINE)


def track_names(request: ChatRequest) -> list[str]:
    """The track names a prompt shows, in the order shown (the first ask's user message)."""
    user = next(m.content for m in request.messages if m.role == "user")
    return [m.group("name") for m in TRACK_LINE.finditer(user)]


def digest_rating(request: ChatRequest) -> str:
    """A rating that depends on the track and the criterion, with a reason."""
    user = next(m.content for m in request.messages if m.role == "user")
    rating = 1 + int(hashlib.sha256(user.encode()).hexdigest(), 16) % 5
    return json.dumps({"reason": "It fits.", "rating": rating})


def by_name(request: ChatRequest) -> str:
    """A position-consistent judge: prefers the track whose name sorts first, wherever it is shown."""
    first, second = track_names(request)
    return json.dumps({"reason": "Closer to the request.", "better": "A" if first <= second else "B"})


def always_a(request: ChatRequest) -> str:
    """A judge with pure position bias: whichever track is shown first wins."""
    return json.dumps({"reason": "The first one.", "better": "A"})


def judge(
    rating: Callable[[ChatRequest], str] = digest_rating,
    comparison: Callable[[ChatRequest], str] = by_name,
) -> Callable[[ChatRequest], str]:
    def respond(request: ChatRequest) -> str:
        return comparison(request) if len(track_names(request)) == 2 else rating(request)

    return respond


def selection_params(**selection: Any) -> SelectionParams:
    settings = {"limit": 2, "pool_size": 8, "tie_margin": 0.05, **selection}
    return SelectionParams.model_validate({"llm": {"backend": "fake"}, "selection": settings})


def session_on(root: Path, stage: str, backend: Backend) -> LLMSession:
    """A session as a stage opens one, on `backend`, with its cache and recordings under root."""
    return folder_session(root, backend, stage=stage, runs=True)


def run_selection(
    root: Path,
    params: SelectionParams,
    responder: Callable[[ChatRequest], str] | None = None,
    *,
    backend: Callable[[], Backend] | None = None,
) -> tuple[list[ScoredRequest], list[dict[str, Any]], dict[str, Any]]:
    """select_score -> select_pick -> metrics; recordings under root/recordings/<stage>/.

    The judge is a FakeBackend answering with `responder`, or what `backend` opens (each stage
    closes its own backend, as a stage does)."""

    def open_backend() -> Backend:
        return backend() if backend is not None else FakeBackend(responder or judge())

    pools = request_pools(params.selection, ROOT)
    with closing(session_on(root, "select_score", open_backend())) as session:
        scored = run_score(params, session, pools)
    with closing(session_on(root, "select_pick", open_backend())) as session:
        picks = [p.record() for p in run_pick(params, session, scored)]
    keys = {
        stage: [c.call.record.key for c in read_stage(root / "recordings" / stage)]
        for stage in ("select_score", "select_pick")
    }
    return scored, picks, compute_metrics(scored, picks, keys)
