"""README.md holds together: every link to a section of it names a heading (as GitHub makes their
anchors), and every picture and file it links to is in the repository."""

from __future__ import annotations

import re

from tests.conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _outside_code(text: str) -> str:
    return re.sub(r"```.*?```", "", text, flags=re.S)


def test_every_link_to_a_section_names_a_heading() -> None:
    text = _outside_code(README)
    headings = {_anchor(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}
    links = re.findall(r"\]\(#([^)]+)\)", text)
    assert len(links) >= 10  # the contents
    assert not sorted(set(links) - headings)


def test_every_picture_and_file_linked_is_in_the_repository() -> None:
    targets = re.findall(r"\]\(((?!https?:|#)[^)\s]+)\)", _outside_code(README))
    assert any(t.endswith(".svg") for t in targets)
    assert not [t for t in targets if not (ROOT / t).exists()]


def test_the_demos_numbers_are_said_to_come_from_a_toy_model() -> None:
    figure = README.index("docs/paper-figure2.svg")
    assert "135-million-parameter toy" in README[figure : figure + 600]
