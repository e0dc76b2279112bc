"""Readers that crash, hang or print what they should not (issue 28, items 8 to 10): deep JSON in a
recording or a cache row, an alias bomb or deep nesting in YAML, a very long line; terminal escapes
and faked headers in what the commands print; a secret in a server URL's path; a dated snapshot
that is no date."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner, Result

from pipeline.errors import BackendError, ConfigError, CorruptRecordError, InputError, LockMismatchError
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.bounds import MAX_LINE_BYTES, check_yaml, depth_problem
from pipeline.llm.cache.store import MAGIC, CallStore, seal
from pipeline.llm.recordings.pins import Pins
from pipeline.llm.recordings.stage_folders import CALLS_FILE
from pipeline.llm.recordings.stage_reader import read_stage
from pipeline.llm.recordings.stage_writer import write_stage
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.redact import redact, redact_url, remember
from pipeline.llm.settings import LLMSettings
from pipeline.llm.terminal import framed, shown
from pipeline.llm.types import CallContext, ChatReply
from pipeline.tools.batch.exchange import answered_by
from pipeline.tools.cli import main
from tests.helpers import request
from tests.project import MODEL, recorded_project

CACHE = Path(".judgeloop/cache")
DEEP = 900  # under orjson's own limit of 1,024, past what Python's recursion walks


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    recorded_project(tmp_path, items=("901",))
    return tmp_path


def run(*args: str) -> Result:
    result = CliRunner().invoke(main, list(args))
    # A clear judgeloop error exits through click; a crash leaves its exception here.
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def deep_meta_line(line: str) -> str:
    """A recorded call's line with a reply meta value nested DEEP levels (its checksum no longer
    matches, but nothing may walk it to find out)."""
    nested = "[" * DEEP + "]" * DEEP
    return line.replace('"meta":{', '"meta":{"deep":' + nested + ",", 1)


# -- 8. deep nesting -----------------------------------------------------------------------------


def test_a_deeply_nested_recording_line_is_a_clear_error_in_every_command(project: Path) -> None:
    path = project / "recordings" / "judge" / CALLS_FILE
    lines = path.read_text(encoding="utf-8").split("\n")
    assert '"meta":{' in lines[0]
    lines[0] = deep_meta_line(lines[0])
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(CorruptRecordError, match=rf"{CALLS_FILE}:1: not a recorded call \(nested more than"):
        list(read_stage(path.parent))
    for command in (["cache", "verify"], ["cache", "gc"], ["cache", "seed"], ["audit"], ["cache", "stats"]):
        result = run(*command)
        if command != ["cache", "stats"]:  # stats counts lines; it parses none
            assert result.exit_code != 0, command
            assert "Fix" in result.output and "Traceback" not in result.output, (command, result.output)
    said = run("cache", "verify").output
    assert "calls.jsonl:1: not a recorded call (nested more than 64 levels deep" in said


def test_a_deeply_nested_cache_row_is_refused_with_its_key_and_the_fix(project: Path) -> None:
    store = CallStore(CACHE)
    key = next(iter(store.keys()))
    raw = store.get_raw(key)
    assert raw is not None
    header, request_part = raw[len(MAGIC) + 65 :].split(b"\n", 1)
    forged = header.replace(b'"meta":{', b'"meta":{"deep":' + b"[" * DEEP + b"]" * DEEP + b",", 1)
    store.put_raw(key, MAGIC + seal(forged) + b"\n" + forged + b"\n" + request_part)
    with pytest.raises(CorruptRecordError, match=r"nested more than 64 levels deep.*cache verify --repair"):
        store.get(key)
    store.close()
    result = run("cache", "verify")
    assert result.exit_code == 1 and f"{key}: cannot be read (nested more than 64 levels" in result.output
    assert run("cache", "verify", "--repair").exit_code == 0


def test_depth_is_measured_without_recursion() -> None:
    value: list[object] = []
    for _ in range(100_000):
        value = [value]
    assert depth_problem(value) is not None
    assert depth_problem({"a": [1, {"b": "c"}]}) is None


# -- 8. YAML: alias bombs and deep nesting --------------------------------------------------------

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(c)}: &{chr(c)} [{', '.join(['*' + chr(c - 1)] * 9)}]\n" for c in range(ord("b"), ord("j"))
)


def test_an_alias_bomb_in_params_yaml_is_refused_at_once_with_its_line(tmp_path: Path) -> None:
    params = tmp_path / "params.yaml"
    params.write_text("llm:\n  backend: fake\n" + BOMB, encoding="utf-8")
    # In a process of its own: before the fix, it ran for minutes.
    code = (
        "import sys\nfrom pathlib import Path\nfrom pipeline.experiments.params import load_params\n"
        "try:\n    load_params(Path(sys.argv[1]))\nexcept Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(params)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.startswith("ConfigError "), done.stdout + done.stderr
    assert f"{params}:" in done.stdout and "an alias bomb" in done.stdout


@pytest.mark.parametrize(
    "text", ["x: " + "[" * 600 + "]" * 600, "".join(f"{' ' * i}k{i}:\n" for i in range(400))]
)
def test_yaml_nested_too_deep_is_refused_before_it_is_composed(tmp_path: Path, text: str) -> None:
    params = tmp_path / "params.yaml"
    params.write_text(text + "\n", encoding="utf-8")
    from pipeline.experiments.params import load_params

    with pytest.raises(ConfigError, match=r"params.yaml:\d+: not valid YAML .*nested more than 64 levels"):
        load_params(params)


def test_a_bomb_in_dvc_lock_is_refused_as_unreadable(tmp_path: Path) -> None:
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\n" + BOMB, encoding="utf-8")
    (tmp_path / "recordings").mkdir()
    with pytest.raises(LockMismatchError, match="an alias bomb"):
        Pins(tmp_path, tmp_path / "recordings").pin(tmp_path / "recordings" / "judge")


def test_a_few_aliases_are_still_read() -> None:
    check_yaml("base: &b {x: 1}\none: *b\ntwo: *b\n")


# -- 8. very long lines ---------------------------------------------------------------------------


def test_a_line_longer_than_the_bound_is_refused_in_data_and_in_recordings(project: Path) -> None:
    from pipeline.data.input_files import read_lines

    data = project / "long.jsonl"
    data.write_bytes(b'{"ok": 1}\n' + b'{"x": "' + b"a" * MAX_LINE_BYTES + b'"}\n')
    with pytest.raises(InputError, match=r"long.jsonl:2: the line is longer than"):
        read_lines(data, "long.jsonl")
    path = project / "recordings" / "judge" / CALLS_FILE
    with path.open("ab") as out:
        out.write(b"a" * (MAX_LINE_BYTES + 1) + b"\n")
    with pytest.raises(CorruptRecordError, match=rf"{CALLS_FILE}:\d+: longer than"):
        list(read_stage(path.parent))


# -- 9. terminal output ---------------------------------------------------------------------------

HOSTILE = "\x1b]0;pwned\x07\x1b[2J\r\u200b\u2028\U000e0041\u202e"


def test_one_escape_shows_every_control_invisible_and_reordering_character() -> None:
    assert shown(HOSTILE) == "\\x1b]0;pwned\\x07\\x1b[2J\\r\\u200b\\u2028\\U000e0041\\u202e"
    assert shown("a\tb\nc") == "a\tb\nc" and shown("a\tb\nc", one_line=True) == "a\\tb\\nc"
    assert shown("ünïcode, emoji 🙂, 日本語") == "ünïcode, emoji 🙂, 日本語"


def test_cache_commands_print_keys_and_run_summaries_escaped(project: Path) -> None:
    store = CallStore(CACHE)
    store.put_raw(f"jl2:{HOSTILE}", b"not a record")
    store.close()
    runs = project / ".judgeloop" / "runs"
    summary = {"stage": "x", "mode": f"auto{HOSTILE}", "hits": 0, "model_calls": 0, "replay_misses": 0}
    (runs / f"evil{'x'}.json").write_text(json.dumps(summary), encoding="utf-8")
    for command in (["cache", "verify"], ["cache", "stats"]):
        result = run(*command)
        assert "\x1b" not in result.output and "\r" not in result.output, (command, result.output)
        assert "\u200b" not in result.output and "\U000e0041" not in result.output
    assert "\\x1b]0;pwned\\x07" in run("cache", "verify").output


def test_an_error_quoting_a_record_is_printed_escaped() -> None:
    error = CorruptRecordError(f"recordings/x/calls.jsonl:1: call {HOSTILE} cannot be trusted")
    assert "\x1b" not in error.message and "\\x1b]0;pwned" in error.message


def test_audit_frames_each_text_so_a_reply_cannot_fake_a_header(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    fake = (
        "Score: 1\n=== judge 999 iteration 0 metric accuracy ===\nkey         jl2:forged\n"
        "--- reply ---\nScore: 5"
    )
    record = CallRecord.new(FakeBackend(name=MODEL).identity(), request("judge this"), ChatReply(text=fake))
    context = CallContext(stage="judge", item="901", labels={"role": "judge", "metric": "accuracy"})
    write_stage(tmp_path / "recordings" / "judge", [RecordedCall(context=context, record=record)])
    result = run("audit", "--recordings", str(tmp_path / "recordings"))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert sum(line.startswith("===") for line in lines) == 1
    assert sum(line.startswith("--- reply ---") for line in lines) == 1
    assert not any(line.startswith("key         jl2:forged") for line in lines)
    assert "  | === judge 999 iteration 0 metric accuracy ===" in lines
    assert framed("a\n=== b") == "  | a\n  | === b"


# -- 10. smaller ----------------------------------------------------------------------------------


def test_a_secret_in_a_base_url_path_segment_is_masked() -> None:
    url = "http://gateway.example/v1/sk-abc123def456ghi789jkl/"
    assert redact_url(url) == "http://gateway.example/v1/***/"
    assert "sk-abc123" not in redact(f"POST {url}chat/completions: 401 Unauthorized")
    LLMSettings(backend="openai", base_url=url, model="m")  # validating it remembers the secret
    remember(url)
    assert "sk-abc123" not in BackendError("the key sk-abc123def456ghi789jkl was refused").message
    # A model's name in a path is not a secret.
    azure = "https://x.openai.azure.com/openai/deployments/gpt-4o-mini-2024-07-18/"
    assert redact_url(azure) == azure


@pytest.mark.parametrize(
    ("said", "ok"),
    [
        ("gpt-4o-mini", True),
        ("gpt-4o-mini-2024-07-18", True),
        ("gpt-4o-mini-0000-99-99", False),
        ("gpt-4o-mini-2024-02-30", False),
        ("gpt-4o-mini-9999-01-01", False),
        ("gpt-4o-mini-2024-07-18-extra", False),
        ("gpt-4o", False),
    ],
)
def test_only_a_real_date_makes_a_dated_snapshot(said: str, ok: bool) -> None:
    assert answered_by("gpt-4o-mini", said) is ok


def test_orjson_itself_refuses_past_its_limit() -> None:
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads("[" * 2000 + "]" * 2000)


def test_status_prints_an_item_id_from_the_data_escaped(project: Path) -> None:
    (project / "data" / "evil.jsonl").write_text(
        json.dumps({"id": f"9{HOSTILE}", "text": "Participant: i slept badly"}) + "\n", encoding="utf-8"
    )
    result = run("status", "--verbose")
    assert "\x1b" not in result.output and "\u202e" not in result.output, result.output
    assert "\\x1b]0;pwned\\x07" in result.output, result.output
