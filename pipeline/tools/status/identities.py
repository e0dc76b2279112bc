"""The model identities `judgeloop status` keys its predicted calls with (pipeline.tools.status.command):
the one the next run computes (the backend asked for it), or, in replay mode, with --offline or when
the backend cannot be reached, llm.digest's or the recordings'; each found when a stage first needs it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.errors import BackendError, ConfigError, JudgeloopError
from pipeline.experiments.design import Design
from pipeline.experiments.params import Params
from pipeline.llm.session import RecordingIndex, resolve_identity
from pipeline.llm.types import Backend, ModelIdentity

__all__ = ["Identities", "IdentityUnknown", "next_identity", "recorded_identity"]


def _no_backend() -> Backend:
    raise AssertionError("replay mode resolves the identity without a backend")


def recorded_identity(params: Params, index: RecordingIndex) -> ModelIdentity:
    """The identity a replay uses; for embedded, the recorded GGUF hash with today's runner settings."""
    replay = params.model_copy(update={"cache": params.cache.model_copy(update={"mode": "replay"})})
    llm = params.llm
    files = {i.digest.split(";")[0] for i in index.identities("embedded", llm.model)}
    if llm.backend != "embedded" or llm.digest or len(files) != 1:
        return resolve_identity(replay, index, _no_backend)
    # EmbeddedBackend.identity()'s layout: of it, only the file hash is knowledge the records add.
    runner = llm.embedded
    digest = (
        f"{files.pop()};n_ctx={llm.options.num_ctx};n_threads={runner.n_threads};n_batch={runner.n_batch}"
    )
    return ModelIdentity(backend="embedded", name=llm.model, digest=digest)


def next_identity(params: Params, index: RecordingIndex, offline: bool) -> tuple[ModelIdentity, str]:
    if params.cache.mode == "replay":
        return resolve_identity(params, index, _no_backend), "llm.digest or the recordings, as replay mode"
    why = "--offline"
    if not offline:
        from pipeline.llm.backends import make_backend  # a backend may pull in heavy imports

        try:
            backend = make_backend(params.llm, Path(params.cache.dir))
            try:
                return backend.identity(), "asked the backend, as the next run will"
            finally:
                backend.close()
        except (BackendError, ConfigError) as exc:
            why = f"the backend could not say: {exc.message}"
    try:
        return recorded_identity(params, index), f"llm.digest or the recordings ({why})"
    except ConfigError as exc:
        # Auto mode: say what the backend said, not the replay-mode wording of the fallback.
        llm, said = params.llm, why.removeprefix("the backend could not say: ")
        raise ConfigError(
            f"cannot tell which model the next run will use: {said}; "
            f"and no recorded call names {llm.backend} model '{llm.model}' either. Fix: start the server "
            "(or correct llm.model / llm.backend in params.yaml); the next run asks it."
        ) from exc


class IdentityUnknown(Exception):
    """The model's identity cannot be found: the whole status fails, not one stage's prediction."""

    def __init__(self, error: JudgeloopError) -> None:
        super().__init__(error.message)
        self.error = error


class Identities:
    """The model identities a prediction keys calls with, each found when a stage first needs it
    (issue 33): when DVC finds every stage up to date, none is dry-run and nothing is looked up,
    where finding it asks the backend or, with --offline, reads every stage's recording, which
    grows with the run. known: the identity and its source, when the caller knows it."""

    def __init__(
        self, params: Params, index: RecordingIndex, offline: bool, known: tuple[ModelIdentity, str] | None
    ) -> None:
        self.params, self.index, self.offline = params, index, offline
        self._found: dict[str, tuple[ModelIdentity, str]] = {} if known is None else {"": known}

    def _find(self, name: str, params: Params) -> tuple[ModelIdentity, str]:
        if name not in self._found:
            try:
                self._found[name] = next_identity(params, self.index, self.offline)
            except JudgeloopError as exc:
                raise IdentityUnknown(exc) from exc
        return self._found[name]

    def default(self) -> tuple[ModelIdentity, str]:
        """params.yaml's model's identity, and where it came from."""
        return self._find("", self.params)

    def of(self, design: Design[Any]) -> ModelIdentity:
        """A design's model's identity: its own, where its llm_overrides entry changes the llm."""
        own = design.load_params().llm
        if own == self.params.llm:
            return self.default()[0]
        return self._find(design.name, self.params.model_copy(update={"llm": own}))[0]
