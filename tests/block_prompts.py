"""The prompts and texts the block tests share: an interview carried by several judge prompts, as
the paper's judge sends it, and lines of text that probe every line break the block rule knows."""

from __future__ import annotations

from hypothesis import strategies as st

from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.records import CallRecord
from pipeline.llm.types import ChatRequest, Message

FAKE = FakeBackend()

lines = st.lists(
    st.text(alphabet=st.sampled_from("ab é\n\r\u2028\x85"), max_size=400) | st.just("x" * 9000), max_size=40
)


def interview(n: int = 300) -> str:
    return "".join(
        f"Participant : line {i}, about sleep and the weekend ({i * 7919 % 997})\n" for i in range(n)
    )


def prompt(metric: str, text: str) -> ChatRequest:
    content = f"Rate the {metric} of this assessment.\n<transcript>\n{text}</transcript>\nAnswer: Score: N\n"
    return ChatRequest(
        messages=(Message(role="system", content="You judge."), Message(role="user", content=content))
    )


def record(request: ChatRequest) -> CallRecord:
    return CallRecord.new(FAKE.identity(), request, FAKE.chat(request))
