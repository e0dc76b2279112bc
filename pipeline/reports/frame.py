"""The frame every report page shares (templates/page.html.j2): one stylesheet, one script, one
Content-Security-Policy, and a link back to the report index over every design.

    html = env.get_template("mine.html.j2").render(**frame(Path("outputs/mine/report.html"), "title"), ...)

The policy lets nothing load (no network, no other file) and runs only the page's own script,
defence in depth behind the templates' escaping. The index is outputs/index.html; each page links
to it relatively, so the outputs folder can be zipped and opened anywhere.
"""

from __future__ import annotations

import base64
import hashlib
import os
from functools import cache
from pathlib import Path
from typing import Any

from markupsafe import Markup

from pipeline.reports.templating import SHARED_TEMPLATES

INDEX = Path("outputs") / "index.html"  # the report index over every design (pipeline.tools.index)


def content_security_policy(script: str) -> str:
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    return f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'sha256-{digest}'"


@cache
def asset(name: str) -> str:
    """A file of the shared templates folder: report.css, report.js."""
    return (SHARED_TEMPLATES / name).read_text(encoding="utf-8")


def page_assets() -> dict[str, Any]:
    script = asset("report.js")
    style = asset("report.css")
    return {"csp": content_security_policy(script), "style": Markup(style), "script": Markup(script)}


def home_link(page: Path) -> str:
    """The index's address from `page`, relative (both taken from the working directory)."""
    # The page's folder resolved, not the page: a link at the page's name is replaced, never followed.
    return Path(os.path.relpath(INDEX.resolve(), page.parent.resolve())).as_posix()


def frame(page: Path, title: str) -> dict[str, Any]:
    """What page.html.j2 needs to frame a page that will be written at `page`."""
    return {**page_assets(), "title": title, "home": home_link(page)}
