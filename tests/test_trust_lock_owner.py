"""Attack 4 of issue 28: the pin of a recording comes from the stage that owns it per dvc.yaml. A
dvc.lock that names the folder under another stage (one dvc.yaml does not define, or another of its
stages, or the owner twice) is refused for that folder; and what is checked against the pin is the
bytes that are parsed, read once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from pipeline.errors import CorruptRecordError, LockMismatchError
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.recordings import offsets, stage_folders, stage_writer
from pipeline.llm.recordings.index import RecordingIndex
from pipeline.llm.recordings.pins import LOCK_FILE, Pins, dir_md5
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import CallContext, ChatReply
from tests.helpers import request

STAGES = ("assess", "judge")


def call(reply: str, stage: str = "judge") -> RecordedCall:
    fake = FakeBackend()
    record = CallRecord.new(fake.identity(), request("judge 901"), ChatReply(text=reply))
    return RecordedCall(context=CallContext(stage=stage, item="901"), record=record)


def project(root: Path, *, dvc_yaml: bool = True) -> None:
    for stage in STAGES:
        stage_writer.write_stage(root / "recordings" / stage, [call(f"Score: 2 from {stage}", stage)])
    if dvc_yaml:
        pipeline = {
            "stages": {
                s: {"cmd": f"python -m stages paper {s}", "outs": [{f"recordings/{s}": {"cache": False}}]}
                for s in STAGES
            }
        }
        (root / "dvc.yaml").write_text(yaml.safe_dump(pipeline))
    lock_as(root, {s: [s] for s in STAGES})


def lock_as(root: Path, outs: dict[str, list[str]], md5: dict[str, str] | None = None) -> None:
    """dvc.lock whose stages name these recordings folders (their md5 as they are, or `md5`)."""
    stages = {
        stage: {
            "cmd": "x",
            "outs": [
                {
                    "path": f"recordings/{folder}",
                    "hash": "md5",
                    "md5": (md5 or {}).get(folder) or dir_md5(root / "recordings" / folder),
                }
                for folder in folders
            ],
        }
        for stage, folders in outs.items()
    }
    (root / LOCK_FILE).write_text(yaml.safe_dump({"schema": "2.0", "stages": stages}, sort_keys=False))


def forge(root: Path) -> str:
    """Replace the judge's recording with a forged reply (checksum recomputed): the md5 it now has."""
    stage_writer.write_stage(root / "recordings" / "judge", [call("Score: 5 forged")])
    return dir_md5(root / "recordings" / "judge")


def served(root: Path, stage: str = "judge") -> str:
    index = RecordingIndex(root / "recordings", Pins(root, root / "recordings"))
    record = index.own(call("").record.key, stage)
    assert record is not None
    return record.reply.text


def test_an_appended_stage_that_dvc_yaml_does_not_define_cannot_pin_a_forged_recording(
    tmp_path: Path,
) -> None:
    project(tmp_path)
    real = dir_md5(tmp_path / "recordings" / "judge")
    forged = forge(tmp_path)
    lock = yaml.safe_load((tmp_path / LOCK_FILE).read_text())
    lock["stages"]["judge"]["outs"][0]["md5"] = real  # the real entry stays as it was
    lock["stages"]["evil"] = {
        "cmd": "x",
        "outs": [{"path": "recordings/judge", "hash": "md5", "md5": forged}],
    }
    (tmp_path / LOCK_FILE).write_text(yaml.safe_dump(lock, sort_keys=False))
    with pytest.raises(
        LockMismatchError, match=r"names recordings/judge under stage 'evil', but stage 'judge' owns it"
    ):
        served(tmp_path)
    assert served(tmp_path, "assess") == "Score: 2 from assess"  # other stages go on


def test_another_pipeline_stage_naming_the_folder_is_refused(tmp_path: Path) -> None:
    project(tmp_path)
    forged = forge(tmp_path)
    lock_as(tmp_path, {"assess": ["assess", "judge"], "judge": ["judge"]}, md5={"judge": forged})
    with pytest.raises(LockMismatchError, match=r"under stage 'assess', but stage 'judge' owns it"):
        served(tmp_path)


def test_a_stage_named_twice_in_dvc_lock_is_refused(tmp_path: Path) -> None:
    """YAML would keep the last of two `judge:` keys: the appended one, with the forged md5."""
    project(tmp_path)
    real = dir_md5(tmp_path / "recordings" / "judge")
    forged = forge(tmp_path)
    entry = "  judge:\n    cmd: x\n    outs:\n    - path: recordings/judge\n      hash: md5\n      md5: {}\n"
    (tmp_path / LOCK_FILE).write_text("schema: '2.0'\nstages:\n" + entry.format(real) + entry.format(forged))
    with pytest.raises(LockMismatchError, match="appears twice"):
        served(tmp_path)


def test_without_dvc_yaml_the_stage_named_like_the_folder_owns_it(tmp_path: Path) -> None:
    project(tmp_path, dvc_yaml=False)
    forged = forge(tmp_path)
    lock_as(tmp_path, {"judge": ["assess"], "evil": ["judge"]}, md5={"judge": forged})
    with pytest.raises(LockMismatchError, match="under stage 'evil', but stage 'judge' owns it"):
        served(tmp_path)
    with pytest.raises(LockMismatchError, match="under stage 'judge', but stage 'assess' owns it"):
        served(tmp_path, "assess")


def test_the_owners_entry_still_pins_and_passes(tmp_path: Path) -> None:
    project(tmp_path)
    assert served(tmp_path) == "Score: 2 from judge"
    forge(tmp_path)
    with pytest.raises(LockMismatchError, match="does not match its entry"):
        served(tmp_path)


@pytest.mark.parametrize("how", ["renamed over", "written in place"])
def test_a_file_swapped_between_the_check_and_the_read_is_never_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """The pinned bytes are hashed as their lines are placed; then (a hostile writer racing the
    reader) the file is replaced by a forged one. What is served must be what was hashed: read
    through the descriptor the pass opened (a file renamed over it is not read), and each line
    checked against its digest (a file written in place is refused, never served)."""
    project(tmp_path)
    calls_file = tmp_path / "recordings" / "judge" / stage_folders.CALLS_FILE
    forged_dir = tmp_path / "forged"
    stage_writer.write_stage(forged_dir, [call("Score: 5 forged")])
    forged_bytes = (forged_dir / stage_folders.CALLS_FILE).read_bytes()
    real_stream = offsets.stream_lines
    swapped: list[Path] = []

    def stream_lines(
        path: Path, fd: int, read: offsets.FileRead, *, md5: bool = True
    ) -> Iterator[tuple[int, int, bytes, str | None]]:
        yield from real_stream(path, fd, read, md5=md5)
        if path == calls_file and not swapped:  # swapped just after it was hashed
            swapped.append(path)
            if how == "renamed over":
                (forged_dir / stage_folders.CALLS_FILE).replace(calls_file)
            else:
                with calls_file.open("r+b") as out:
                    out.write(forged_bytes)

    monkeypatch.setattr(offsets, "stream_lines", stream_lines)
    if how == "renamed over":
        assert served(tmp_path) == "Score: 2 from judge"
    else:
        with pytest.raises(CorruptRecordError, match="changed on disk since the recording was read"):
            served(tmp_path)
    assert swapped == [calls_file]
