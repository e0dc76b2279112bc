"""(c) Bytes stored per call in the recordings vs the raw request + reply bytes, on judge-like
calls that all carry the same 20 kB transcript.

    .venv/bin/python bench/storage.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import judge_requests, transcript
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.recordings import stage_writer
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import CallContext


def main() -> None:
    text = transcript()
    fake = FakeBackend(lambda r: "Explanation: the assessment misses two symptoms.\nScore: 3")
    print(f"transcript {len(text)} chars in every prompt")
    print("calls  raw bytes/call  stored bytes/call  ratio")
    for n in (4, 40, 400):
        calls = []
        for i, request in enumerate(judge_requests(n, text)):
            record = CallRecord.new(fake.identity(), request, fake.chat(request))
            context = CallContext(stage="judge", item="1", step=i // 4, labels={"metric": str(i % 4)})
            calls.append(RecordedCall(context=context, record=record))
        raw = sum(
            len(c.record.request.model_dump_json()) + len(c.record.reply.model_dump_json()) for c in calls
        )
        with tempfile.TemporaryDirectory() as tmp:
            stage_writer.write_stage(Path(tmp), calls)
            stored = sum(p.stat().st_size for p in Path(tmp).iterdir())
        print(f"{n:<6} {raw / n:>14.0f} {stored / n:>18.0f}  {raw / stored:5.1f}x smaller")


if __name__ == "__main__":
    main()
