"""Fuzzing the journal a killed writer of a sharded recording leaves (pipeline.llm.recordings.shards
.clear_killed_writer, which the next reader or writer runs): the journal (`.shards-writing.tmp`) lists
the shard files its writer was adding, and what it lists that the manifest in place does not name
is deleted. A journal is a file in a folder someone else may hand over: any bytes in it, beside a
manifest edited or not, must delete only shard files the manifest in place does not name, nothing
else of the folder and nothing outside it, and never raise other than a clear judgeloop error."""

from __future__ import annotations

from pathlib import Path

import orjson
from hypothesis import given
from hypothesis import strategies as st

from pipeline.llm.recordings import shards
from pipeline.llm.recordings.stage_folders import CALLS_FILE
from tests.fuzz.support import clear_or_correct, fuzz, inputs, laid_out, mixed_texts, only_inside
from tests.fuzz.test_fuzz_shards import LOOKALIKES
from tests.fuzz.test_fuzz_shards import seed as seed  # the fixture

STRAY = "calls-0-00000000000000aa.jsonl"  # a shard a killed writer left: not in the manifest


def _named(manifest: bytes) -> set[str]:
    """The shard files a manifest's lines name, read as plainly as can be (no checks)."""
    found = set()
    for line in manifest.split(b"\n"):
        try:
            entry = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("shard"), str):
            found.add(entry["shard"])
    return found


@st.composite
def journals(draw: st.DrawFn, names: list[str]) -> bytes:
    listed = draw(
        st.lists(
            st.sampled_from(
                [*names, CALLS_FILE, STRAY, STRAY, *LOOKALIKES, *LOOKALIKES, "..", "/etc/passwd"]
            ),
            min_size=1,
            max_size=12,
        )
    )
    glue = draw(st.sampled_from([b"\n", b" ", b"\r\n", b"\x00", b"\n\n"]))
    text = glue.join(name.encode("utf-8", "surrogatepass") for name in listed)
    return draw(
        st.one_of(st.just(text), inputs(text), mixed_texts.map(lambda t: t.encode("utf-8", "replace")))
    )


@fuzz
@given(data=st.data())
def test_a_killed_writer_s_journal_deletes_only_shards_the_manifest_does_not_name(
    sandbox: Path, seed: dict[str, bytes], data: st.DataObject
) -> None:
    folder = laid_out(sandbox / "recordings" / "judge", seed)
    (folder / STRAY).write_bytes(b"{}\n")
    for name in data.draw(st.lists(st.sampled_from(LOOKALIKES), max_size=3)):
        (folder / name).write_bytes(b"x")
    manifest = data.draw(st.one_of(st.just(seed[CALLS_FILE]), inputs(seed[CALLS_FILE])))
    (folder / CALLS_FILE).write_bytes(manifest)
    journal_bytes = data.draw(journals(sorted(seed)))
    (folder / shards.JOURNAL).write_bytes(journal_bytes)
    before = {path.name for path in folder.iterdir()}
    removed = clear_or_correct(lambda: shards.clear_killed_writer(folder))
    after = {path.name for path in folder.iterdir()}
    gone = before - after - {shards.JOURNAL}
    assert after <= before
    if isinstance(removed, list):
        assert set(removed) == gone
    assert all(shards.SHARD_NAME.fullmatch(name) for name in gone), f"deleted what is no shard: {gone}"
    assert not gone & _named(manifest), f"deleted a shard the manifest names: {gone & _named(manifest)}"
    only_inside(sandbox.parent, sandbox)


def test_a_journal_beside_a_manifest_damaged_at_its_opening_deletes_no_shard_it_names(
    sandbox: Path, seed: dict[str, bytes]
) -> None:
    folder = laid_out(sandbox / "recordings" / "damaged", seed)
    (folder / CALLS_FILE).write_bytes(b" " + seed[CALLS_FILE])
    (folder / shards.JOURNAL).write_text("\n".join(name for name in seed if name != CALLS_FILE))
    shards.clear_killed_writer(folder)
    assert {path.name for path in folder.iterdir()} >= set(seed)
