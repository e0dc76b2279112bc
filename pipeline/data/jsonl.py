"""What the stages write: one canonical JSON line per result, written whole or not at all.

Same results, same bytes: a replay must reproduce every output exactly. `write_jsonl` and
`read_jsonl` keep typed results (pydantic models) sorted by item; `write_records` and `read_records`
keep plain records in the order given, for a design whose records are built by hand (the selection).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from pipeline.errors import InputError
from pipeline.llm.files import atomic_write_chunks, replacement
from pipeline.llm.keys import canonical_json
from pipeline.llm.project_files import validation_problem


class Result(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


R = TypeVar("R", bound=Result)


def write_records(path: Path, records: Iterable[Mapping[str, Any]]) -> None:
    """One canonical JSON line per record, in the order given; a kill leaves the old file whole.
    Written a line at a time: the refine stage's output holds each round's 20 kB prompt (3 kB a
    call), and joining it whole held it twice over at the end of the stage (issue 33)."""
    atomic_write_chunks(path, (canonical_json(r) + "\n" for r in records))


def _item(result: Result) -> str:
    return str(getattr(result, "item", ""))


def _line(result: Result) -> str:
    return canonical_json(result.model_dump(mode="json")) + "\n"


def write_jsonl(path: Path, results: Iterable[Result]) -> None:
    """The results one line each, sorted by item (stably), written whole or not at all. They are
    written as they come while they come in item order, as a stage yields them (pipeline.llm.runner),
    so that a stage's results are never held whole (issue 33); any that come out of order are held
    and merged in at the end, which gives the bytes that sorting them all would."""
    rows = iter(results)
    keys: list[str] = []  # of the lines written in order: what the late rows are merged by
    late: list[Result] = []

    def in_order() -> Iterator[str]:
        for result in rows:
            key = _item(result)
            if keys and key < keys[-1]:
                late.append(result)
                late.extend(rows)
                return
            keys.append(key)
            yield _line(result)

    # Written in place as they come, in a locked temporary file (pipeline.llm.killed_writes: one a
    # killed run leaves is swept by the next write there), read back only for a merge.
    with replacement(path) as new:
        new.write(in_order())
        if not late:
            new.commit()
            return
        late.sort(key=_item)
        new.out.flush()
        new.out.seek(0)
        merged = heapq.merge(
            zip(keys, (line.decode("utf-8") for line in new.out), strict=True),
            ((_item(r), _line(r)) for r in late),
            key=lambda row: row[0],
        )
        atomic_write_chunks(path, (line for _, line in merged))


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """The file's lines, each up to a b"\n", read a line at a time, so that a reader never holds the
    file whole. A stage ends its lines with b"\n" alone: canonical JSON escapes \r and the controls
    below U+0020 but writes U+0085, U+2028 and U+2029 as they are, inside a string, so a line is never
    cut where str.splitlines() would cut it (a result holding one was refused as "not a record")."""
    check_results_file(path)
    with path.open("rb") as handle:
        for number, chunk in enumerate(handle, start=1):
            yield number, line_text(chunk, path, number)


def line_text(chunk: bytes, path: Path, number: int) -> str:
    """A line (`chunk`, up to and with its b"\n") as text without its end (a \r before the \n too:
    a file saved with CRLF line ends), or an InputError naming it where it is not UTF-8."""
    return decoded(chunk, path, number).removesuffix("\n").removesuffix("\r")


def check_results_file(path: Path) -> None:
    """InputError, naming the file, where there is no results file to read at `path`."""
    if not path.exists():
        raise InputError(str(path), None, "file not found", "run the stage that writes it first (dvc repro)")
    if not path.is_file():
        raise InputError(
            str(path), None, "not a file", "move it away and run the stage that writes it (dvc repro)"
        )


def decoded(chunk: bytes, path: Path, number: int) -> str:
    """A results file's line (`chunk`, up to and with a b"\n", numbered `number`) as text;
    InputError naming the file and the line where it is not UTF-8, as no stage writes it."""
    try:
        return chunk.decode("utf-8")
    except UnicodeDecodeError as exc:
        why = f"byte 0x{chunk[exc.start]:02x} is not UTF-8, which a stage never writes"
        raise InputError(str(path), number, why, "re-run the stage that writes it") from None


def iter_jsonl(path: Path, model: type[R]) -> Iterator[R]:
    """read_jsonl one result at a time: each line parsed when reached, nothing kept (a file of a
    run's results can be far larger than what a reader needs of it at once)."""
    for number, line in _lines(path):
        try:
            yield model.model_validate_json(line)
        except ValidationError as exc:
            raise InputError(
                str(path),
                number,
                f"not a {model.__name__} record ({validation_problem(path, exc)})",
                "re-run the stage that writes it",
            ) from exc


def read_jsonl(path: Path, model: type[R]) -> list[R]:
    return list(iter_jsonl(path, model))


def read_records(path: Path) -> list[dict[str, Any]]:
    records = []
    for number, line in _lines(path):
        try:
            records.append(orjson.loads(line))
        except orjson.JSONDecodeError as exc:
            raise InputError(
                str(path), number, f"not a JSON line ({exc})", "re-run the stage that writes it"
            ) from None
    return records
