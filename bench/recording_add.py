"""What making a stage's recording costs a call (StageRecording.add: the call packed into blocks and
its line spooled), on judge-like calls: N items of a 20 kB transcript, 4 metric calls each (the
project's judge prompts, bench.common), so that an item's later calls share its blocks. review25
added a comparison of each block with the text held under its id (two texts made to share a 64-bit
blob id are refused when the recording is made); run it on two checkouts to compare.

    nice -n 19 .venv/bin/python bench/recording_add.py --items 100 --runs 5

Prints the CPU (user + system) per call of each run, and the median.
"""

from __future__ import annotations

import os
import statistics

import click

from bench.common import judge_request, transcript
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.recordings.stage_writer import StageRecording
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import CallContext


def _cpu() -> float:
    usage = os.times()
    return usage.user + usage.system


def _calls(items: int) -> list[RecordedCall]:
    fake = FakeBackend()
    calls = []
    for item in range(items):
        text = transcript().replace("line", f"item {item} line")
        for i in range(4):
            request = judge_request(i, text)
            context = CallContext(stage="judge", item=str(300 + item), step=0, labels={"metric": str(i)})
            calls.append(
                RecordedCall(
                    context=context, record=CallRecord.new(fake.identity(), request, fake.chat(request))
                )
            )
    return calls


@click.command()
@click.option("--items", default=100, show_default=True)
@click.option("--runs", default=5, show_default=True)
def main(items: int, runs: int) -> None:
    calls = _calls(items)
    per_call = []
    for _ in range(runs):
        recording = StageRecording()
        start = _cpu()
        for call in calls:
            recording.add(call)
        per_call.append((_cpu() - start) / len(calls) * 1e6)
        recording.close()
    shown = ", ".join(f"{us:.0f}" for us in per_call)
    click.echo(f"{len(calls)} calls: add CPU µs a call {shown}; median {statistics.median(per_call):.0f}")


if __name__ == "__main__":
    main()
