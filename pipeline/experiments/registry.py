"""Where the judge designs are found: the folders of pipeline/experiments/ that have a design.py,
and the `judgeloop.designs` entry points of installed packages (a design in a package of its own):

    [project.entry-points."judgeloop.designs"]
    pairwise = "acme_judges.pairwise.design:DESIGN"

Every tool iterates these (`judgeloop status`, `report`, `calibrate`, `dvc-yaml`, params
gathering); nothing outside a design's folder and this module names a design. Finding the names
imports nothing: `load_design` imports one design, so that the stage runner imports only the
design whose stage it runs (its code is what DVC tracks for the stage).
"""

from __future__ import annotations

from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from pipeline.errors import ConfigError
from pipeline.experiments.design import Design, load_ref

GROUP = "judgeloop.designs"
DEFAULT = "paper"  # the default experiment: the only one `judgeloop status` plans with no DVC project
_HERE = Path(__file__).resolve().parent


def _builtin() -> dict[str, str]:
    found = sorted(p.parent.name for p in _HERE.glob("*/design.py"))
    return {name: f"{__package__}.{name}.design:DESIGN" for name in found}


def _plugins() -> dict[str, str]:
    return {ep.name: ep.value for ep in metadata.entry_points(group=GROUP)}


@cache
def design_refs() -> dict[str, str]:
    """name -> "module:attribute" of its Design, the default first, then the others by name."""
    builtin, plugins = _builtin(), _plugins()
    clash = sorted(builtin.keys() & plugins.keys())
    if clash:
        raise ConfigError(
            f"the {GROUP} entry point(s) {', '.join(clash)} have the name of a design of judgeloop's own. "
            "Fix: rename the design in its package's entry points."
        )
    refs = builtin | plugins
    order = sorted(refs, key=lambda name: (name != DEFAULT, name))
    return {name: refs[name] for name in order}


def design_names() -> list[str]:
    return list(design_refs())


def load_design(name: str) -> Design[Any]:
    """One design, imported now; no other design is imported."""
    refs = design_refs()
    if name not in refs:
        raise ConfigError(
            f"no design named {name!r} (designs: {', '.join(refs) or 'none'}). Fix: a folder "
            f"pipeline/experiments/{name}/ with a design.py exporting DESIGN, or a {GROUP} entry point."
        )
    design = load_ref(refs[name])
    if not isinstance(design, Design) or design.name != name:
        raise ConfigError(f"{refs[name]} is not the Design named {name!r}. Fix its name or the reference.")
    return design


def designs() -> list[Design[Any]]:
    """Every design, the default first."""
    return [load_design(name) for name in design_refs()]
