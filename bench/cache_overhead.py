"""(a) A cache hit through judgeloop's layer vs a raw diskcache get of the same record.

judgeloop's hit = derive the key from the request (canonical JSON + sha256), read the record,
parse and validate it, log the call. The raw get = diskcache.Cache.get(key) of the stored bytes.
Each round builds its requests anew, as a pipeline run does: CPython caches a string's UTF-8 form
once something has encoded it, and reusing one request object would hide that cost.

Also shown: the key's floor, sha256 of each prompt's UTF-8 bytes, which any content-addressed
lookup pays before it can read anything.

    .venv/bin/python bench/cache_overhead.py
"""

from __future__ import annotations

import hashlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import judge_requests, transcript
from pipeline.llm.fake import FakeBackend
from pipeline.llm.session import LLMSession, RecordingIndex
from pipeline.llm.store import CallStore
from pipeline.llm.types import CallContext

N = 400
ROUNDS = 5


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        fake = FakeBackend(lambda r: "Explanation: fine.\nScore: 4")
        session = LLMSession(
            stage="judge",
            mode="auto",
            store=CallStore(root / "cache"),
            index=RecordingIndex(root / "recordings"),
            recordings_dir=root / "recordings",
            identity=fake.identity,
            backend=lambda: fake,
        )
        context = CallContext(stage="judge", item="1")
        keys = [session.chat(r, context).record.key for r in judge_requests(N, transcript())]
        assert session.store is not None
        raw_cache = session.store._cache  # the diskcache.Cache underneath, for the raw baseline
        ours, raw, floor = [], [], []
        for _ in range(ROUNDS):
            requests = judge_requests(N, transcript())
            start = time.perf_counter()
            for request in requests:
                session.chat(request, context)
            ours.append((time.perf_counter() - start) / N)
            start = time.perf_counter()
            for key in keys:
                raw_cache.get(key)
            raw.append((time.perf_counter() - start) / N)
            prompts = [r.messages[0].content for r in judge_requests(N, transcript())]
            start = time.perf_counter()
            for prompt in prompts:
                hashlib.sha256(prompt.encode("utf-8")).digest()
            floor.append((time.perf_counter() - start) / N)
        assert len(fake.calls) == N
        ours_us, raw_us, floor_us = (statistics.median(x) * 1e6 for x in (ours, raw, floor))
        size = len(raw_cache.get(keys[0]))
        print(f"record size {size} bytes, {N} hits x {ROUNDS} rounds (median), fresh requests each round")
        print(f"judgeloop hit        {ours_us:8.1f} us/call")
        print(f"raw diskcache get    {raw_us:8.1f} us/call")
        print(f"ratio                {ours_us / raw_us:8.2f}x   (target <= 3x)")
        print(f"sha256 of the prompt {floor_us:8.1f} us/call   (the key's floor)")
        print(f"floor + raw get      {(floor_us + raw_us) / raw_us:8.2f}x   (the best a content hash can do)")


if __name__ == "__main__":
    main()
