"""What a recording's bytes are made of, and what the unique text it holds is (issue 33).

    nice -n 19 .venv/bin/python bench/recording_bytes.py make /tmp/rb/calls-10000 --calls 10000
    nice -n 19 .venv/bin/python bench/recording_bytes.py measure /tmp/rb/calls-10000
    nice -n 19 .venv/bin/python bench/recording_bytes.py measure .          # the committed demos

`make` builds bench/million.py's synthetic project (pipeline.testing.synthetic) and records its three
LLM stages live on the fake backend. `measure` reads every stage's recording under ROOT/recordings
(one file, or a manifest and its shards) and prints, a stage at a time and in all:

- the files: call lines, blob (block) lines, tables of items, manifest;
- each call line's bytes by field, as canonical JSON: the key, checksum, model, context, times and
  versions, the request without its messages' text, the messages' literal text and their block
  references, the reply's text, its logprobs and the rest of the reply, and the JSON punctuation;
- the unique text the recordings hold, each distinct piece counted once across all stages: the
  interviews (ROOT/data), the distinct blocks, the distinct literal prompt text (a message's literal
  strings, each distinct string once), the distinct reply texts (and, apart, distinct logprobs);
- what zlib (git's loose objects, level 6 here as git's default) makes of each stage's files.

Both denominators are printed: bytes a call over the interviews alone (what bench/million.py divides
by) and over the unique text held (interviews' blocks + distinct prompt text + distinct replies).
"""

from __future__ import annotations

import base64
import json
import sys
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROOT = Path(__file__).resolve().parents[1]
SPEAKERS = ("Ellie : ", "Participant : ")


def cj(value: Any) -> int:
    """The bytes of `value` as canonical JSON (sorted keys, no spaces), as a recording writes it."""
    return len(orjson.dumps(value, option=orjson.OPT_SORT_KEYS))


def stage_files(stage: Path) -> list[Path]:
    """The stage's recording files: calls.jsonl, and where it is a manifest, the shards it names."""
    manifest = stage / "calls.jsonl"
    first = manifest.open("rb").readline()
    if b'"shard"' in first and b'"sha256"' in first and b'"key"' not in first:
        names = [orjson.loads(line)["shard"] for line in manifest.read_bytes().splitlines() if line]
        return [manifest, *(stage / name for name in names)]
    return [manifest]


def lines_of(path: Path) -> Iterator[bytes]:
    with path.open("rb") as stream:
        for line in stream:
            yield line.rstrip(b"\n")


class Tally:
    """Bytes by part, and the distinct texts seen."""

    def __init__(self) -> None:
        self.parts: Counter[str] = Counter()
        self.calls = 0
        self.blocks: dict[str, int] = {}  # id -> text bytes
        self.block_lines: dict[str, int] = {}  # id -> its blob line's bytes
        self.block_z: dict[str, int] = {}  # id -> its blob line's bytes were its text zlib'd and base64'd
        self.block_texts: dict[str, str] = {}
        self.ref_messages = 0  # messages with at least one block reference
        self.call_line_bytes = 0
        self.blob_line_bytes = 0
        self.literals: set[str] = set()
        self.replies: set[str] = set()
        self.logprobs: set[bytes] = set()
        self.messages: Counter[str] = Counter()  # role -> literal bytes
        self.templates: Counter[str] = Counter()  # a message's literal text -> times seen

    def call(self, line: bytes) -> None:
        record = orjson.loads(line)
        self.calls += 1
        total = len(line) + 1
        self.call_line_bytes += total
        self.parts["line break"] += 1
        request = dict(record.pop("request"))
        messages = request.pop("messages")
        reply = dict(record.pop("reply"))
        text = reply.pop("text")
        logprobs = reply.pop("logprobs", None)
        counted = 1
        for name in ("key", "checksum", "model", "context"):
            size = cj(record.pop(name)) + len(name) + 3
            self.parts[name] += size
            counted += size
        rest = cj(record) - 2 if record else 0  # created_at, recipe, judgeloop_version
        self.parts["created_at, recipe, version"] += rest
        counted += rest
        literal = refs = 0
        for message in messages:
            content = message["content"]
            parts = [content] if isinstance(content, str) else content
            for part in parts:
                if isinstance(part, str):
                    size = cj(part)
                    literal += size
                    self.literals.add(part)
                    self.messages[message["role"]] += size
                else:
                    refs += cj(part) + 1
            self.templates["".join(p for p in parts if isinstance(p, str))] += 1
            self.ref_messages += any(not isinstance(p, str) for p in parts)
        self.parts["prompt literal text"] += literal
        self.parts["prompt block references"] += refs
        counted += literal + refs
        shell = cj(
            {"request": {**request, "messages": [{"role": m["role"], "content": ""} for m in messages]}}
        )
        self.parts["request shell (options, roles)"] += shell - 2
        counted += shell - 2
        self.parts["reply text"] += cj(text)
        self.replies.add(text)
        counted += cj(text)
        if logprobs is not None:
            packed = orjson.dumps(logprobs, option=orjson.OPT_SORT_KEYS)
            self.parts["reply logprobs"] += len(packed)
            self.logprobs.add(packed)
            counted += len(packed)
        reply_rest = (
            cj(reply) + len('"reply":') + len('"text":') + 2 + (len('"logprobs":') + 1 if logprobs else 0)
        )
        self.parts["reply rest (tokens, reason)"] += reply_rest
        counted += reply_rest
        self.parts["JSON punctuation left"] += total - counted

    def held(self) -> int:
        """The distinct blocks, literal prompt strings and reply texts, each once."""
        return (
            sum(self.blocks.values())
            + sum(len(t.encode()) for t in self.literals)
            + sum(len(t.encode()) for t in self.replies)
        )

    def merge(self, other: Tally) -> None:
        self.parts.update(other.parts)
        self.calls += other.calls
        self.blocks.update(other.blocks)
        self.block_lines.update(other.block_lines)
        self.block_z.update(other.block_z)
        self.block_texts.update(other.block_texts)
        self.ref_messages += other.ref_messages
        self.call_line_bytes += other.call_line_bytes
        self.blob_line_bytes += other.blob_line_bytes
        self.literals |= other.literals
        self.replies |= other.replies
        self.logprobs |= other.logprobs
        self.messages.update(other.messages)
        self.templates.update(other.templates)

    def blob(self, line: bytes) -> None:
        record = orjson.loads(line)
        self.blob_line_bytes += len(line) + 1
        text = record["text"]
        self.blocks[record["blob"]] = len(text.encode())
        self.block_lines[record["blob"]] = len(line) + 1
        self.block_z[record["blob"]] = (
            cj({"blob": record["blob"], "z": base64.b64encode(zlib.compress(text.encode(), 9)).decode()}) + 1
        )
        self.block_texts[record["blob"]] = text


def measure_stage(stage: Path, tally: Tally) -> dict[str, Any]:
    """The stage's files into `tally` (all stages') and a tally of its own (its unique text)."""
    own = Tally()
    row = _measure_stage(stage, own)
    row["call lines"] = own.call_line_bytes
    row["blob z lines"] = sum(own.block_z.values())
    row["blob z zlib"] = len(
        zlib.compress(
            b"".join(
                orjson.dumps(
                    {"blob": b, "z": base64.b64encode(zlib.compress(t.encode(), 9)).decode()},
                    option=orjson.OPT_SORT_KEYS,
                )
                + b"\n"
                for b, t in sorted(own.block_texts.items())
            ),
            6,
        )
    )
    row["blob lines zlib"] = len(
        zlib.compress(
            b"".join(
                orjson.dumps({"blob": b, "text": t}, option=orjson.OPT_SORT_KEYS) + b"\n"
                for b, t in sorted(own.block_texts.items())
            ),
            6,
        )
    )
    row["refs"] = own.parts["prompt block references"]
    row["ref messages"] = own.ref_messages
    tally.merge(own)
    row["unique held"] = own.held()
    return row


def _measure_stage(stage: Path, tally: Tally) -> dict[str, Any]:
    files = stage_files(stage)
    row: dict[str, Any] = {"stage": stage.name, "files": len(files), "bytes": 0, "zlib": 0}
    for path in files:
        data = path.read_bytes()
        row["bytes"] += len(data)
        row["zlib"] += len(zlib.compress(data, 6))
    blobs_before = tally.blob_line_bytes
    kinds: Counter[str] = Counter()
    for path in files:
        name = path.name
        if name.startswith("items-"):
            kinds["item tables"] += path.stat().st_size
            continue
        if len(files) > 1 and name == "calls.jsonl":
            kinds["manifest"] += path.stat().st_size
            continue
        for line in lines_of(path):
            if line.startswith(b'{"blob":'):
                tally.blob(line)
            elif line:
                tally.call(line)
    kinds["blob lines"] = tally.blob_line_bytes - blobs_before
    row["calls"] = tally.calls
    row["kinds"] = dict(kinds)
    return row


def unique_text(root: Path, tally: Tally) -> dict[str, int]:
    data = root / "data"
    interviews = sum(p.stat().st_size for p in data.rglob("*") if p.is_file()) if data.is_dir() else 0
    return {
        "interviews (data/)": interviews,
        "distinct blocks": sum(tally.blocks.values()),
        "distinct literal prompt text": sum(len(t.encode()) for t in tally.literals),
        "distinct reply texts": sum(len(t.encode()) for t in tally.replies),
        "distinct logprobs (JSON)": sum(map(len, tally.logprobs)),
    }


def report(root: Path) -> dict[str, Any]:
    tally = Tally()
    stages = [
        measure_stage(p, tally)
        for p in sorted((root / "recordings").iterdir())
        if (p / "calls.jsonl").is_file()
    ]
    total = sum(row["bytes"] for row in stages)
    calls = tally.calls
    unique = unique_text(root, tally)
    held = unique["distinct blocks"] + unique["distinct literal prompt text"] + unique["distinct reply texts"]
    return {
        "calls": calls,
        "bytes": total,
        "zlib": sum(row["zlib"] for row in stages),
        "stages": stages,
        "unique held per stage, summed": sum(row["unique held"] for row in stages),
        "parts": dict(tally.parts),
        "unique": unique,
        "unique held": held,
        "templates": len(tally.templates),
        "template bytes once": sum(cj(t) for t in tally.templates),
        "messages": dict(tally.messages),
        "alternatives": alternatives(stages, tally),
    }


def alternatives(stages: list[dict[str, Any]], tally: Tally) -> dict[str, int]:
    """Bytes of other layouts, computed from what the recordings hold (not written)."""
    total = sum(row["bytes"] for row in stages)
    blob_lines = sum(row["kinds"]["blob lines"] for row in stages)
    other = total - blob_lines - sum(row["call lines"] for row in stages)  # manifests, item tables
    once = sum(tally.block_lines.values())  # each block's line once across the stages
    # The synthetic transcripts' lines as the prompts render them ("Ellie : ...", "Participant : ...").
    transcript_only = sum(
        size
        for blob, size in tally.blocks.items()
        if all(line.startswith(SPEAKERS) for line in tally.block_texts[blob].splitlines())
    )
    return {
        "today": total,
        "blocks once across stages": total - blob_lines + once,
        "blob text zlib+base64 (per stage)": total - blob_lines + sum(row["blob z lines"] for row in stages),
        "git's zlib, today (per file)": sum(row["zlib"] for row in stages),
        "git's zlib of blob lines, today": sum(row["blob lines zlib"] for row in stages),
        "git's zlib of blob lines, zlib+base64": sum(row["blob z zlib"] for row in stages),
        "other files (manifests, item tables)": other,
        "distinct blocks of transcript lines only (text)": transcript_only,
    }


def printed(result: dict[str, Any]) -> str:
    calls = max(result["calls"], 1)
    out = [f"{result['calls']:,} calls, {result['bytes']:,} bytes ({result['bytes'] / calls:,.0f} a call)"]
    out.append(f"{'stage':<18}{'calls':>8}{'bytes':>13}{'a call':>9}{'zlib a call':>13}  files, kinds")
    for row in result["stages"]:
        per = max(row["calls"], 1)
        kinds = ", ".join(f"{k} {v / per:,.0f}" for k, v in row["kinds"].items())
        out.append(
            f"{row['stage']:<18}{row['calls']:>8,}{row['bytes']:>13,}{row['bytes'] / per:>9,.0f}"
            f"{row['zlib'] / per:>13,.0f}  {row['files']} files; a call: {kinds}; "
            f"its unique text {row['unique held'] / per:,.0f}"
        )
    out.append("a call line, by field (bytes a call):")
    for name, size in sorted(result["parts"].items(), key=lambda kv: -kv[1]):
        out.append(f"    {name:<34}{size / calls:>9,.0f}")
    out.append(
        "    literal prompt text by role: "
        + ", ".join(f"{k} {v / calls:,.0f}" for k, v in result["messages"].items())
    )
    out.append(
        f"    distinct message literal texts: {result['templates']:,} "
        f"({result['template bytes once'] / calls:,.0f} a call if each stored once)"
    )
    out.append("unique text (bytes a call):")
    for name, size in result["unique"].items():
        out.append(f"    {name:<34}{size / calls:>9,.0f}")
    held = result["unique held"]
    interviews = result["unique"]["interviews (data/)"]
    out.append(f"    {'held: blocks + literal + replies':<34}{held / calls:>9,.0f}")
    per = result["bytes"] / calls
    if interviews:
        out.append(f"ratio over interviews alone: {per / (interviews / calls):.2f}x")
    out.append(f"ratio over the unique text held: {per / (held / calls):.2f}x")
    each = result["unique held per stage, summed"]
    out.append(
        f"unique text held per stage, summed over stages: {each / calls:,.0f} a call; "
        f"ratio {per / (each / calls):.2f}x"
    )
    out.append("other layouts (bytes a call, computed, not written):")
    for name, size in result["alternatives"].items():
        out.append(f"    {name:<48}{size / calls:>9,.0f}{size / held:>8.2f}x held")
    out.append(
        f"zlib of the files: {result['zlib'] / calls:,.0f} a call "
        f"({result['zlib'] / held:.2f}x the unique text held)"
    )
    return "\n".join(out)


@click.group()
def main() -> None:
    """What recordings' bytes are made of (issue 33)."""


@main.command("make")
@click.argument("root", type=click.Path(file_okay=False, path_type=Path))
@click.option("--calls", type=int, default=10_000, show_default=True)
@click.option("--chars", type=int, default=20_000, show_default=True)
def make_command(root: Path, calls: int, chars: int) -> None:
    """The synthetic project at about CALLS calls, recorded live on the fake backend."""
    from pipeline.testing.synthetic import items_for, make_project, run_stages

    root.mkdir(parents=True)
    make_project(root, items_for(calls), chars, ROOT / "params.yaml")
    click.echo(f"{run_stages(root, 'auto')} calls recorded")


@main.command("measure")
@click.argument("root", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--json-out", type=click.Path(dir_okay=False, path_type=Path))
def measure_command(root: Path, json_out: Path | None) -> None:
    """The bytes of ROOT/recordings, by stage and by field, and the unique text they hold."""
    result = report(root)
    click.echo(printed(result))
    if json_out is not None:
        json_out.write_text(json.dumps(result, indent=1), encoding="utf-8")


@main.command("parse")
@click.argument(
    "roots", nargs=-1, required=True, type=click.Path(file_okay=False, exists=True, path_type=Path)
)
@click.option("--stage", default="refine", show_default=True, help="A stage recorded in one file.")
@click.option("--lines", "count", type=int, default=2000, show_default=True)
@click.option("--rounds", type=int, default=5, show_default=True)
def parse_command(roots: tuple[Path, ...], stage: str, count: int, rounds: int) -> None:
    """CPU a call line costs to read back, per ROOT (the same calls in two forms, say): parsed with
    its blocks restored (line_checks.parse_call_line) and verified (CallRecord.problem), and its
    block ids found (blob_refs); the ROOTs taken in turn each round, CPU time (process_time)."""
    import time

    from pipeline.llm.recordings import line_checks, line_format, stage_reader

    loaded = []
    for root in roots:
        folder = root / "recordings" / stage
        blobs = stage_reader.split_recording(folder).blobs
        lines = [
            line.decode() for line in lines_of(folder / "calls.jsonl") if line.startswith(b'{"checksum"')
        ]
        loaded.append((root, blobs, lines[:count]))
    for round_ in range(rounds):
        for root, blobs, lines in loaded:
            started = time.process_time()
            for line in lines:
                call = line_checks.parse_call_line(line, blobs, "x")
                assert call.record.problem() is None
            parsed = time.process_time() - started
            started = time.process_time()
            for line in lines:
                line_format.blob_refs(line)
            refs = time.process_time() - started
            click.echo(
                f"round {round_} {root}: parse+verify {parsed / len(lines) * 1e6:.0f} us a line, "
                f"blob_refs {refs / len(lines) * 1e6:.1f} us a line"
            )


if __name__ == "__main__":
    main()
