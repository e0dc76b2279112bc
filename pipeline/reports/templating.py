"""The one templating setup every report page uses (jinja2).

Autoescaping for every template whatever its name; StrictUndefined, so a misspelt field fails the
render instead of leaving a silent gap in the page; block tags take their line with them, so the
templates can be indented for reading without the pages filling with blank lines.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2

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
    )
    env.filters.update(filters)
    return env
