"""The one templating setup every report page uses (jinja2).

Autoescaping for every template whatever its name, each text made `visible` first; StrictUndefined,
so a misspelt field fails the render instead of leaving a silent gap in the page; block tags take
their line with them, so the templates can be indented for reading without the pages filling with
blank lines.

What a page shows is what others wrote (a reply, a prompt, an item id, a model's name). Escaping
keeps it from being markup, but a browser still acts on the characters themselves: a bidi override
(U+202E) or isolate makes the text read in another order than it is stored (Trojan Source), a
zero-width or tag character hides words a model reads, a carriage return shows as a space. So every
`{{ value }}` that is text is shown as the terminal shows it (pipeline.llm.terminal.shown: each such
character as its escape, `\\u202e`), in text and attributes alike; Markup is the page's own (the
SVGs and the item pages' `<pre>` elements, which show their texts the same way where they are
written). `judgeloop audit --format jsonl` gives any recorded text's exact characters.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup, escape

from pipeline.llm.terminal import shown

SHARED_TEMPLATES = Path(__file__).resolve().parent / "templates"


def make_environment(*folders: Path, **filters: Callable[..., Any]) -> jinja2.Environment:
    """A template environment over a design's own template folders, then the shared ones
    (pipeline/reports/templates: the page frame, the stylesheet, the script), with a page's own filters."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([*folders, SHARED_TEMPLATES]),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        finalize=visible,
    )
    env.filters["one_line"] = one_line
    env.filters.update(filters)
    return env


def one_line(value: str) -> Markup:
    """`{{ value | one_line }}`: a text shown on one line, its line breaks and tabs as escapes too
    (a fact's value: HTML would fold a line break into a space)."""
    return escape(shown(value, one_line=True))


def visible(value: Any) -> Any:
    """What a `{{ value }}` shows: a text with every control, bidi and invisible character as its
    escape (the module's docstring); Markup, numbers and the rest as they are."""
    return shown(value) if isinstance(value, str) and not isinstance(value, Markup) else value
