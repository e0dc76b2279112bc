"""Every long text once in the report: later occurrences become references to its first place.

A judge prompt is the rubric, the transcript and the assessment; a regeneration prompt the
transcript and the judge's replies; a re-ask repeats the first ask. Written out in full, 142
interviews of ten iterations make a page of 100 MB. So each text is shown once, where a reader
looks for it first (the transcript at the top of its item, a reply under its call, a prompt
template in the appendix), and wherever else it occurs the page shows a link to it instead.

The unit is a whole text a reader recognises, not the recordings' content-defined blocks (those
cut at line boundaries that mean nothing on the page): the texts the report places, and the fixed
parts of the prompt templates. Any other long run of text that no known text covers gets a place of
its own at its first occurrence, so a prompt built some other way (an older template, a variant)
still repeats nothing. The substitution is exact: the page holds every prompt character for
character (a control, bidi or invisible character as its escape: .markup), and the text behind a
reference can be read back from the element it points to.
"""

from __future__ import annotations

import re
from bisect import bisect_left, insort
from dataclasses import dataclass
from functools import cache
from string import Formatter

from pipeline.judges.rubric.judge_prompts import JUDGE_PROMPTS
from pipeline.judges.rubric.prompts import (
    ASSESS_PROMPT,
    FEEDBACK_ITEM,
    FEEDBACK_ITEM_UNSCORED,
    REFINE_PROMPT,
    RETRY_PROMPT,
    SCORE_REMINDER,
    SYSTEM_PROMPT,
)

# A reference costs about 60 bytes of markup: shorter texts are cheaper written out again. A template
# part is referenced from thousands of prompts and its link is short, so it pays off sooner.
MIN_SHARED = 160
MIN_TEMPLATE_PART = 48


@dataclass(frozen=True)
class Segment:
    """A piece of a placed text: literal text, the home of a long text (`home` is its element id),
    or a reference to a text placed earlier (`target` is the id of the element that holds it)."""

    text: str  # the literal or home text; for a reference, its label
    home: str = ""
    target: str = ""


@dataclass(frozen=True)
class Placed:
    """A text as the page shows it. `id` names an element whose text content is exactly `text`
    (`core_id` the span around the text without its outer whitespace, when there is any)."""

    id: str
    lead: str
    core_id: str
    segments: tuple[Segment, ...]
    trail: str
    chars: int
    lines: int

    @property
    def shown_chars(self) -> int:
        return len(self.lead) + len(self.trail) + sum(len(s.text) for s in self.segments)

    @property
    def references(self) -> int:
        return sum(1 for s in self.segments if s.target)


@dataclass(frozen=True)
class _Known:
    text: str
    target: str
    label: str


def _longest_first(known: _Known) -> int:
    return -len(known.text)


def template_parts() -> list[tuple[str, str, str]]:
    """(id, label, text) of every fixed part of the prompt templates long enough to be shared."""
    templates = {
        "system": ("system prompt", SYSTEM_PROMPT),
        "assess": ("assessment prompt", ASSESS_PROMPT),
        "refine": ("regeneration prompt", REFINE_PROMPT),
        "retry": ("assessment re-ask", RETRY_PROMPT),
        "reminder": ("judge re-ask", SCORE_REMINDER),
        "feedback": ("feedback item", FEEDBACK_ITEM),
        "feedback-unscored": ("feedback item, unscored", FEEDBACK_ITEM_UNSCORED),
        **{f"judge-{_slug(m)}": (f"{m} judge prompt", t) for m, t in JUDGE_PROMPTS.items()},
    }
    parts = []
    for name, (label, template) in templates.items():
        literals = [literal for literal, *_ in Formatter().parse(template)]
        long = [text.strip() for text in literals if len(text.strip()) >= MIN_TEMPLATE_PART]
        for n, text in enumerate(long, start=1):
            numbered = f"{label} {n}/{len(long)}" if len(long) > 1 else label
            parts.append((f"tpl-{name}-{n}", numbered, text))
    return parts


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-") or "x"


class PageTexts:
    """The texts placed so far on one page: the prompt templates' fixed parts and the item's texts."""

    def __init__(self, *, place_templates: bool = False) -> None:
        self._shared: list[_Known] = []
        self._local: list[_Known] = []
        # Every known text, longest first (a stable sort of _shared + _local: on a tie, the shared
        # ones, then the item's, each in the order remembered), kept sorted as texts are remembered.
        self._known: list[_Known] = []
        # The ids some reference points to: only those elements need an id on the page.
        self.referenced: set[str] = set()
        # The same, from the page's own texts only (not the templates'): what the page links to.
        self._cited: set[str] = set()
        # The prompt templates' fixed parts, for the page's appendix: (label, placed text). Placed
        # once a process, the same on every page, and copied (place_templates: placed anew).
        if place_templates:
            self.templates = [
                (label, self.place(text, ident, label, shared=True))
                for ident, label, text in template_parts()
            ]
            return
        placed = _templates_placed()
        self._shared, self._known = list(placed._shared), list(placed._known)
        self.referenced = set(placed.referenced)
        self.templates = list(placed.templates)

    def cited_templates(self) -> list[tuple[str, Placed]]:
        """The templates the texts placed so far link to, and those the templates themselves link to:
        what a page showing only these texts needs of the appendix."""
        owner: dict[str, int] = {}
        for n, (_, placed) in enumerate(self.templates):
            for target in (placed.id, placed.core_id, *(s.home for s in placed.segments)):
                if target:
                    owner[target] = n
        needed: set[int] = set()
        pending = [t for t in self._cited if t in owner]
        while pending:
            n = owner[pending.pop()]
            if n not in needed:
                needed.add(n)
                pending += [s.target for s in self.templates[n][1].segments if s.target in owner]
        return [t for n, t in enumerate(self.templates) if n in needed]

    def start_item(self) -> None:
        # Items share only the templates: their texts differ, and a short search stays fast.
        self._local = []
        self._known = list(self._shared_sorted())

    def place(self, text: str, ident: str, label: str, *, shared: bool = False) -> Placed:
        """Show `text` at element `ident`: known texts become references, new long ones are homed here."""
        core = text.strip()
        start = text.find(core) if core else len(text)
        lead, trail = text[:start], text[start + len(core) :]
        core_id = f"{ident}-c" if (lead or trail) else ident
        pieces = self._substitute(core, self._known)
        segments: list[Segment] = []
        homes = 0
        for piece in pieces:
            if isinstance(piece, _Known):
                segments.append(Segment(piece.label, target=piece.target))
                self.referenced.add(piece.target)
                if not shared:
                    self._cited.add(piece.target)
            elif len(piece) >= MIN_SHARED and piece != core:
                # Part of this text, new to the page: its home is here, so a later occurrence links back.
                home = f"{ident}-{homes}"
                homes += 1
                segments.append(Segment(piece, home=home))
                self._remember(piece, home, f"part of {label}", shared)
            else:
                segments.append(Segment(piece))
        if len(core) >= (MIN_TEMPLATE_PART if shared else MIN_SHARED):
            self._remember(core, core_id, label, shared)
        return Placed(
            ident,
            lead,
            core_id if core_id != ident else "",
            tuple(segments),
            trail,
            len(text),
            text.count("\n") + 1,
        )

    def _remember(self, text: str, target: str, label: str, shared: bool) -> None:
        known = _Known(text, target, label)
        if shared:  # before the item's texts of its length: sorted anew (the templates, once a process)
            self._shared.append(known)
            self._known = sorted(self._shared + self._local, key=_longest_first)
        else:  # after every known text of its length
            self._local.append(known)
            insort(self._known, known, key=_longest_first)

    def _shared_sorted(self) -> list[_Known]:
        return sorted(self._shared, key=_longest_first)

    @staticmethod
    def _substitute(text: str, known: list[_Known]) -> list[str | _Known]:
        pieces: list[str | _Known] = [text] if text else []
        # A known text longer than `text` is in none of its pieces, and the list is longest first:
        # one bisection skips them all (most texts placed are short replies, most known texts long).
        for candidate in known[bisect_left(known, -len(text), key=_longest_first) :]:
            needle, out = candidate.text, []
            for piece in pieces:
                if isinstance(piece, _Known) or len(piece) < len(needle) or needle not in piece:
                    out.append(piece)
                    continue
                for n, between in enumerate(piece.split(needle)):
                    if n:
                        out.append(candidate)
                    if between:
                        out.append(between)
            pieces = out
        return pieces


@cache
def _templates_placed() -> PageTexts:
    """The prompt templates' fixed parts placed on an empty page, once a process (PageTexts copies them)."""
    return PageTexts(place_templates=True)
