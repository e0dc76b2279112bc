"""Fuzzing what `judgeloop audit` reads and shows (pipeline.tools.audit): it reads each stage's
recording unverified (an edited record is exactly what an auditor wants to see), by every way it
has (the whole file, one item's lines, one key's), and shows each call as text, Markdown and JSON
lines. tests/fuzz/test_fuzz_records.py and test_fuzz_shards.py fuzz the verified reads; an
unverified read skips the key's and checksum's derivation, so here the shapes past the parsers
reach the formats. The property of tests/fuzz/support.py for every read and every format."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given

from pipeline.llm.recordings.stage_folders import CALLS_FILE
from pipeline.llm.records import RecordedCall
from pipeline.tools.audit.calls import Marks, iter_calls
from pipeline.tools.audit.formats import Format, render
from tests.fuzz.support import clear_or_correct, fuzz, inputs, laid_out, only_inside
from tests.fuzz.test_fuzz_records import CALL_LINE, RECORDING

FORMATS: tuple[Format, ...] = ("text", "markdown", "jsonl")


@fuzz
@given(data=inputs(RECORDING, CALL_LINE + b"\n"))
def test_audit_s_unverified_reads_and_its_formats(sandbox: Path, data: bytes) -> None:
    root = laid_out(sandbox / "recordings", {f"judge/{CALLS_FILE}": data})
    marks = Marks()
    untrusted = {"judge": "edited, for the fuzz test"}
    for items, keys in [((), ()), (("903", ""), ()), ((), ("k", "sha256:" + "0" * 64))]:

        def read(items: tuple[str, ...] = items, keys: tuple[str, ...] = keys) -> list[RecordedCall]:
            return list(iter_calls(root, (), untrusted, marks, items, keys))

        calls = clear_or_correct(read)
        if isinstance(calls, list):
            for fmt in FORMATS:

                def show(fmt: Format = fmt, calls: list[RecordedCall] = calls) -> str:
                    return render(calls, fmt, {}, marks)

                shown = clear_or_correct(show)
                assert not isinstance(shown, str) or "\x1b" not in shown, "a terminal escape shown raw"
    only_inside(sandbox.parent, sandbox)


def test_the_seed_is_audited_as_it_is(sandbox: Path) -> None:
    edited = RECORDING.replace(b'"text":"', b'"text":"\\u001b[2J', 1)
    root = laid_out(sandbox / "recordings", {f"judge/{CALLS_FILE}": edited})
    calls = list(iter_calls(root))
    assert len(calls) > 1
    for fmt in FORMATS:
        shown = render(calls, fmt, {})
        assert "\x1b" not in shown and "2J" in shown
