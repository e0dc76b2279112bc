"""The engine's own params.yaml sections, `llm` and `cache`, and how any section is read.

Every design's stages read the same params.yaml; the engine knows only the two sections every LLM
stage shares. A design declares its own sections (pydantic models, `Section`) in its own folder, and
`pipeline.experiments.params.Params` gathers them.

Environment variables may override only what cannot change a reply, so that `dvc.lock`, which
records params.yaml, always says what was computed (to run another model, use
`dvc exp run -S llm.backend=ollama -S llm.model=gemma3:27b`, which DVC records):

    JUDGELOOP_PARAMS        path of params.yaml                (default ./params.yaml)
    JUDGELOOP_CACHE_DIR     local diskcache folder             (cache.dir)
    JUDGELOOP_CACHE_MODE    auto | replay | refresh | off      (cache.mode)
    JUDGELOOP_BASE_URL      server URL                         (llm.base_url)
    JUDGELOOP_PARALLELISM   the server's parallel slots        (llm.parallelism)
    JUDGELOOP_SERVERS       a pool of servers, `URL=SLOTS,...` (llm.servers)
    JUDGELOOP_READ_TIMEOUT  seconds to wait for a reply        (llm.read_timeout_s)
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar
from urllib.parse import urlsplit

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

from pipeline.errors import ConfigError
from pipeline.llm.bounds import check_yaml
from pipeline.llm.files import LOCAL_STATE, open_regular
from pipeline.llm.params_errors import duplicate_keys, params_problems
from pipeline.llm.project_files import inside_project, refuse_link_out, yaml_problem
from pipeline.llm.redact import redact_url, remember
from pipeline.llm.types import Options
from pipeline.llm.yaml_scalars import read_apart

CacheMode = Literal["auto", "replay", "refresh", "off"]
TooLong = Literal["unscored", "fail"]


class Section(BaseModel):
    """A params.yaml section: unknown keys are refused, so a typo cannot pass for a default; NaN and
    infinity are refused in every number (a YAML `.nan` is a float like any other)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


def _no_nul(value: str) -> str:
    # A YAML "\0" escape: every open of the path would raise ValueError, as a traceback.
    if "\0" in value:
        raise ValueError("holds a NUL character, which no path can hold")
    return value


def _in_the_project(value: str) -> str:
    # A stage writes its outputs before DVC looks at them (and DVC takes only outs in the project):
    # `out: /home/u/.bashrc` or `../../elsewhere` would be written over first. Judged on the text
    # alone, as the stages read it (relative to the project's folder, where they run).
    outside = os.path.isabs(value) or os.path.normpath(value).split(os.sep)[0] == os.pardir
    if outside:
        how = "an absolute path" if os.path.isabs(value) else "a path that leads out of the project (..)"
        raise ValueError(
            f"{how}, where a stage writes an output before DVC looks; outputs stay inside the project. "
            "Fix: a path relative to the project's folder (such as outputs/...)"
        )
    if os.path.normpath(value).split(os.sep)[0] == LOCAL_STATE:
        # Local state may be linked anywhere (pipeline.llm.files): an out there could be sent out of
        # the project by a link; and git ignores the folder, so the out would never be committed.
        raise ValueError(
            f"a path in {LOCAL_STATE}/, judgeloop's local state on this machine (ignored by git, and "
            "possibly a link to another disk), not an output of the experiment. "
            "Fix: a path relative to the project's folder (such as outputs/...)"
        )
    return value


# A path or a folder named in params.yaml: an empty one would name the working directory itself.
PathParam = Annotated[str, Field(min_length=1, pattern=r"\S"), AfterValidator(_no_nul)]
# A path a stage writes (an output): also relative, and inside the project (its folder, the one
# params.yaml is in). Data a stage reads may be anywhere (a corpus on another disk): PathParam.
OutParam = Annotated[PathParam, AfterValidator(_in_the_project)]
Seconds = Annotated[float, Field(gt=0, le=86_400)]


def in_flight(slots: int) -> int:
    """How many requests judgeloop keeps at a server with `slots` parallel slots (llm.parallelism).

    With several slots, as many again wait in the server's queue (Ollama queues what exceeds
    OLLAMA_NUM_PARALLEL; vLLM and llama-server do too), so that a slot that frees up starts the next
    request at once rather than after its reply has travelled back, been read, and the next request
    has travelled out: against a fast server that round trip, not the model, bounds the throughput
    (bench/rag_batch.py). A queued request waits at most about one generation, which counts
    against llm.read_timeout_s, and in Ollama's total_duration (which latency budgets read,
    pipeline.llm.latency), as any wait for a busy server does. A single slot (the embedded model
    computes on this machine's cores, where a second request would only take turns with the
    first) gets one at a time.
    """
    return 2 * slots if slots > 1 else 1


class EmbeddedSettings(Section):
    n_threads: int = Field(2, ge=1, le=1024)
    n_batch: int = Field(512, ge=1)


def http_url(value: str) -> str:
    """A server's address: an http(s) URL with a host, whose credentials are masked in every
    message from here on."""
    remember(value)
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"{redact_url(value)!r} is not an http(s) URL with a host (e.g. http://127.0.0.1:11434)"
        )
    return value


class ServerSettings(Section):
    """One server of a pool (llm.servers): where it answers, and its parallel slots."""

    base_url: str
    parallelism: int = Field(1, ge=1, le=256)

    _http_url = field_validator("base_url")(http_url)


def parse_servers(value: Any) -> Any:
    """llm.servers as JUDGELOOP_SERVERS spells it, `URL=SLOTS,URL=SLOTS` (slots default to 1);
    anything else is left for validation."""
    if not isinstance(value, str):
        return value
    servers = []
    for entry in filter(None, (part.strip() for part in value.split(","))):
        url, _, slots = entry.rpartition("=") if "=" in entry else (entry, "", "1")
        servers.append({"base_url": url, "parallelism": slots})
    return servers


class LLMSettings(Section):
    # A name in pipeline.llm.backends' registry (embedded, ollama, openai, fake, or a plugin's).
    backend: str = Field("embedded", min_length=1)
    model: str = Field("SmolLM2-135M-Instruct.Q4_1", min_length=1)
    digest: str | None = Field(None, min_length=1)
    base_url: str = "http://127.0.0.1:11434"
    api_key_env: str = "OPENAI_API_KEY"
    parallelism: int = Field(1, ge=1, le=256)
    # A pool of servers of llm.backend's kind, serving the same weights, instead of base_url and
    # parallelism (pipeline.llm.backends.pool). Not in any stage's params: the pool cannot change a reply.
    servers: list[ServerSettings] = Field(default_factory=list)
    connect_timeout_s: Seconds = 5.0
    read_timeout_s: Seconds = 300.0
    max_retries: int = Field(5, ge=0, le=100)
    max_server_errors: int = Field(2, ge=0, le=100)
    # A prompt too long for the model's context: `unscored` records that item as unscored with the
    # reason and the stage goes on (counted in its metrics); `fail` stops the stage at the first one.
    too_long: TooLong = "unscored"
    options: Options = Field(default_factory=Options)
    embedded: EmbeddedSettings = Field(default_factory=EmbeddedSettings)

    _servers_from_text = field_validator("servers", mode="before")(parse_servers)
    _http_url = field_validator("base_url")(http_url)


class CacheSettings(Section):
    mode: CacheMode = "auto"
    dir: PathParam = ".judgeloop/cache"  # the local cache: may lie anywhere (another disk)
    recordings: OutParam = "recordings"  # DVC-pinned, in the repository: inside the project
    # git: the recordings are git files (the demos); dvc: DVC-cached outputs that `dvc push` sends
    # to the project's remote and `dvc pull` brings back (pipeline.llm.recordings.store).
    recordings_store: Literal["git", "dvc"] = "git"


class EngineSettings(Section):
    """What opening an LLM session needs; every design's params extend it."""

    llm: LLMSettings = Field(default_factory=LLMSettings)
    cache: CacheSettings = Field(default_factory=CacheSettings)
    # A design's own llm values over the shared section, by design name (`llm_overrides.paper.model`;
    # an empty value: the shared one); each design's LLM stages depend on its entry alone, so one
    # design's model changes no other's.
    llm_overrides: dict[str, dict[str, Any] | None] = Field(default_factory=dict)


ENV_OVERRIDES: dict[str, tuple[str, str]] = {
    "JUDGELOOP_CACHE_MODE": ("cache", "mode"),
    "JUDGELOOP_CACHE_DIR": ("cache", "dir"),
    "JUDGELOOP_BASE_URL": ("llm", "base_url"),
    "JUDGELOOP_PARALLELISM": ("llm", "parallelism"),
    "JUDGELOOP_SERVERS": ("llm", "servers"),
    "JUDGELOOP_READ_TIMEOUT": ("llm", "read_timeout_s"),
}
# Variables that once chose the model: they would change replies behind dvc.lock's back.
RETIRED_ENV = {
    "JUDGELOOP_BACKEND": "llm.backend",
    "JUDGELOOP_MODEL": "llm.model",
    "JUDGELOOP_DIGEST": "llm.digest",
}

S = TypeVar("S", bound=BaseModel)


def params_path() -> Path:
    return Path(os.environ.get("JUDGELOOP_PARAMS", "params.yaml"))


def merged(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """`over` laid over `base`, mappings merged key by key (llm.options.num_ctx alone, say); an
    empty value in `over` keeps the base's."""
    out = dict(base)
    for key, value in over.items():
        if value is None:
            continue
        old = out.get(key)
        out[key] = merged(old, value) if isinstance(old, Mapping) and isinstance(value, Mapping) else value
    return out


def read_params_file(
    path: Path, environ: Mapping[str, str] | None = None, design: str | None = None
) -> dict[str, Any]:
    """params.yaml as a dict, with the environment's overrides applied; for `design`, its entry of
    llm_overrides laid over the llm section."""
    env = os.environ if environ is None else environ
    for var, param in RETIRED_ENV.items():
        if env.get(var):
            raise ConfigError(
                f"{var} is no longer read: it changed what the stages compute while dvc.lock recorded "
                f"params.yaml. Fix: unset it and run `dvc exp run -S {param}=...` (or edit params.yaml)."
            )
    raw: dict[str, Any] = {}
    if path.exists():
        raw = _parsed(path, params_text(path))
    overrides = raw.get("llm_overrides")
    own = overrides.get(design) if design is not None and isinstance(overrides, dict) else None
    if isinstance(own, dict) and own:
        shared = raw.get("llm")
        raw["llm"] = merged(shared if isinstance(shared, dict) else {}, own)
    for var, (section, field) in ENV_OVERRIDES.items():
        if var in env and env[var] != "":
            if raw.get(section) is None:  # absent, or `cache:` with every key commented out
                raw[section] = {}
            if isinstance(raw[section], dict):  # else its own error names it (an item set into a
                raw[section][field] = env[var]  # list or a number was a TypeError's traceback)
    return raw


MAX_PARAMS_BYTES = 2**20  # a params file a thousand times the committed one is some other file


def params_text(path: Path) -> str:
    """params.yaml as text: UTF-8, of a params file's size, or a ConfigError naming the line. Read
    through one descriptor, no more than the bound: a link to /dev/zero (a link is what git can
    hold), a pipe or a folder in its place is refused, not read until the memory runs out."""
    fix = "Fix: check that JUDGELOOP_PARAMS (or ./params.yaml) names your params file."
    refuse_link_out(path)  # a link out of the project (git can hold one) is no params file of ours
    try:
        with open_regular(path) as file:
            data = file.read(MAX_PARAMS_BYTES + 1)
    except OSError as exc:  # NotARegularFile, or not this user's to read
        raise ConfigError(f"{path}: {exc.strerror or exc}. {fix}") from None
    if len(data) > MAX_PARAMS_BYTES:
        raise ConfigError(
            f"{path}: more than {MAX_PARAMS_BYTES:,} bytes, far more than a params file holds. {fix}"
        )
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"{path}:{line}: byte 0x{data[exc.start]:02x} is not UTF-8. Fix: re-encode the file as UTF-8."
        ) from None


_PARSED: dict[str, dict[str, Any]] = {}  # a text parsed before in this process -> its mapping


def _parsed(path: Path, text: str) -> dict[str, Any]:
    """The YAML mapping, refusing what yaml.safe_load lets through: a key given twice in one mapping
    (the last would silently win) and a file that is no mapping. A text this process parsed before
    (`judgeloop check` reads params.yaml for each of its 16 stages) is not parsed again: a copy of
    its mapping is given, so that no caller's change reaches the next."""
    if text not in _PARSED:
        _PARSED.clear()  # one text kept: params.yaml as it is now
        _PARSED[text] = _parse(path, text)
    return copy.deepcopy(_PARSED[text])


def _composed(text: str) -> tuple[yaml.Node | None, Any]:
    """The file's node tree and its mapping from one parse (yaml.safe_load's result, and
    params_errors.compose's tree), through libyaml where PyYAML has it (a tenth of the pure parser's
    time, paid by every stage process). A text libyaml refuses is parsed again by the pure parser, so
    that the error, and its line, are the ones yaml.safe_load gives."""
    fast = getattr(yaml, "CSafeLoader", None)
    if fast is not None:
        with contextlib.suppress(yaml.YAMLError):
            return _composed_by(fast, text)
    return _composed_by(yaml.SafeLoader, text)


def _composed_by(loader_class: Any, text: str) -> tuple[yaml.Node | None, Any]:
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        return node, None if node is None else loader.construct_document(node)
    finally:
        loader.dispose()


def _parse(path: Path, text: str) -> dict[str, Any]:
    try:
        check_yaml(text)  # bounded before composing: an alias bomb or deep nesting (pipeline.llm.bounds)
        node, loaded = _composed(text)
        repeated = duplicate_keys(node)
        apart = read_apart(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = yaml_problem(path, exc)  # the line quoted only from a file inside the project
        raise ConfigError(f"{path}{where}: not valid YAML ({problem}). Fix the syntax there.") from exc
    if repeated:
        line, key, first = repeated[0]
        raise ConfigError(
            f"{path}:{line}: '{key}' is given twice in one section (first on line {first}); YAML would "
            "keep the last silently. Fix: keep one of them."
        )
    if apart:
        line, text, ours, dvcs = apart[0]
        raise ConfigError(
            f"{path}:{line}: {text} is {ours} to judgeloop (YAML 1.1) but {dvcs} to DVC (YAML 1.2), "
            "which dvc.lock records. Fix: write the number both read alike (without a leading 0, "
            "without ':'), or quote it if it is text."
        )
    if loaded is None:
        raise ConfigError(
            f"{path}: holds no parameters (empty, or comments only), so every section would take its "
            "defaults without a word. Fix: restore it (git checkout -- params.yaml), or delete it to "
            "run on the defaults."
        )
    if not isinstance(loaded, dict):
        raise ConfigError(
            f"{path}: holds a {type(loaded).__name__}, not the mapping of sections params.yaml is "
            "(llm:, cache:, ...). Fix: check that it is your params file."
        )
    return loaded


def overridden_by(environ: Mapping[str, str] | None = None) -> dict[tuple[str, str], str]:
    """(section, key) -> the JUDGELOOP_* variable that sets it in this environment."""
    env = os.environ if environ is None else environ
    return {target: var for var, target in ENV_OVERRIDES.items() if env.get(var)}


def validate_params(
    model: type[S],
    raw: Mapping[str, Any],
    path: Path,
    overridden: Mapping[tuple[str, str], str] | None = None,
) -> S:
    """`raw` validated as `model`; a ConfigError naming each refused value's line in `path` (or the
    variable that set it) and, for an unknown key, the nearest known one."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        try:
            text: str | None = params_text(path)  # one bounded open of a regular file, never a link out
        except ConfigError:
            text = None
        problems = params_problems(exc, model, str(path), text, overridden or {}, inside_project(path))
        plural = "s" if len(problems) > 1 else ""
        raise ConfigError(
            f"{path}: {len(problems)} parameter{plural} refused:\n  "
            + "\n  ".join(problems)
            + f"\nFix the value{plural} there (README: the params of each design), or the JUDGELOOP_* "
            "variable named."
        ) from exc


def load_settings(
    model: type[S],
    path: Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    only_its_sections: bool = False,
    design: str | None = None,
) -> S:
    """params.yaml validated as `model` (a Section gathering the sections a caller needs).

    only_its_sections: ignore the file's other top-level sections (another design's), so that a
    stage depends on its own sections alone."""
    path = path or params_path()
    raw = read_params_file(path, environ, design)
    if only_its_sections:
        raw = {name: value for name, value in raw.items() if name in model.model_fields}
    return validate_params(model, raw, path, overridden_by(environ))
