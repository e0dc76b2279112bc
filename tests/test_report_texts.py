"""The report's store of shared texts: whatever the texts, each placed text reads back exactly, and a
long text placed again becomes one link to its first place."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.experiments.paper.report.texts import MIN_SHARED, PageTexts, Placed, template_parts


class Reader:
    """What a browser reads back: each id's text, each link replaced by the text at its target."""

    def __init__(self) -> None:
        self.by_id: dict[str, str] = {}

    def read(self, placed: Placed) -> str:
        core = "".join(self.by_id[s.target] if s.target else s.text for s in placed.segments)
        for s in placed.segments:
            if s.home:
                self.by_id[s.home] = s.text
        self.by_id[placed.core_id or placed.id] = core
        return placed.lead + core + placed.trail


def reader_with_templates(texts: PageTexts) -> Reader:
    reader = Reader()
    for _, placed in texts.templates:
        reader.read(placed)
    return reader


# Fragments that recur: long ones (worth a link), short ones, whitespace, a template's own words.
LONG = [f"line {n} of a long interview text\n" * 8 for n in range(4)]
FRAGMENTS = st.sampled_from([*LONG, "Score: 3", "\n", "  ", "Explanation: ", template_parts()[0][2]])
TEXTS = st.lists(st.lists(FRAGMENTS, max_size=6).map("".join) | st.text(max_size=400), max_size=12)


@settings(max_examples=200, deadline=None)
@given(TEXTS)
def test_every_placed_text_reads_back_exactly(texts: list[str]) -> None:
    store = PageTexts()
    reader = reader_with_templates(store)
    for n, text in enumerate(texts):
        if n == len(texts) // 2:
            store.start_item()
        assert reader.read(store.place(text, f"t{n}", f"text {n}")) == text


def test_a_long_text_placed_again_is_one_link_to_its_first_place() -> None:
    store = PageTexts()
    transcript = "Ellie: how are you\nParticipant: tired, most nights\n" * 10
    assert len(transcript) >= MIN_SHARED
    first = store.place(transcript, "item-1-transcript", "transcript")
    assert [s.text for s in first.segments] == [transcript.strip()]
    prompt = store.place(f"Here is the transcript:\n{transcript}\nScore it.", "call-1", "prompt")
    assert [(s.text, s.target) for s in prompt.segments] == [
        ("Here is the transcript:\n", ""),
        ("transcript", "item-1-transcript-c"),
        ("\n\nScore it.", ""),  # the transcript's own last newline, then the prompt's
    ]
    # Another item's texts are not searched: items share only the prompt templates.
    store.start_item()
    assert store.place(transcript, "item-2-transcript", "transcript").references == 0
