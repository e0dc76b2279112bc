"""Which recordings folders belong to the pipeline: each is owned by the stage of dvc.yaml whose
`outs` name it (`judgeloop dvc-yaml` names stage S's recording `recordings/S`).

A folder under recordings/ that no stage owns was made by something else: `judgeloop
judge-evaluate` (its `--stage`, which may never be a pipeline stage's name), a collaborator, or
anyone with write access to the folder. Its calls are never pinned by dvc.lock, so what reads the
experiment's record (the pins, the report pages, `judgeloop audit`) asks here who owns a folder,
rather than trusting whatever folder it finds.

dvc.yaml and dvc.lock are read with a YAML loader that refuses a key named twice in one mapping (a
stage appended again under its own name would otherwise silently replace the first).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from pipeline.errors import LockMismatchError
from pipeline.llm.bounds import check_yaml
from pipeline.llm.project_files import link_out, yaml_problem

PIPELINE_FILE = "dvc.yaml"
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's when built with it: dvc.lock is long


class _UniqueKeys(_LOADER):  # type: ignore[misc,valid-type]
    """The YAML loader, refusing a mapping that names a key twice."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        # The keys' scalar text, not constructed: dvc.lock holds thousands of small mappings.
        keys = [key.value for key, _ in node.value if isinstance(key, yaml.ScalarNode)]
        if len(set(keys)) != len(keys):
            twice = next(key for i, key in enumerate(keys) if key in keys[:i])
            raise yaml.constructor.ConstructorError(
                None, None, f"{twice!r} appears twice in one mapping", node.start_mark
            )
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping


def load_yaml(path: Path, what: str) -> Any:
    """dvc.yaml or dvc.lock; LockMismatchError, naming the file and the fix, for one that is not
    readable YAML (or names a key twice), or a link out of the project (pipeline.llm.project_files)."""
    refused = link_out(path)
    if refused is not None:
        raise LockMismatchError(refused)
    try:
        text = path.read_text(encoding="utf-8")
        check_yaml(text)  # no alias bomb, no nesting past the composer's stack (pipeline.llm.bounds)
        return yaml.load(text, Loader=_UniqueKeys)
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise LockMismatchError(
            f"{path}: not readable YAML ({yaml_problem(path, exc)}), so {what} cannot be checked. "
            f"Fix: restore it from git (git checkout -- {path.name})."
        ) from exc


def stages_of(data: Any) -> dict[Any, Any]:
    stages = data.get("stages") if isinstance(data, dict) else None
    return stages if isinstance(stages, dict) else {}


def outs_of(stage: Any) -> list[Any]:
    outs = stage.get("outs") if isinstance(stage, dict) else None
    return outs if isinstance(outs, list) else []


def out_path(out: Any) -> str | None:
    """The path an entry of `outs` names: a path, {path: options} (dvc.yaml) or {"path": ...} (dvc.lock)."""
    if isinstance(out, str):
        return out
    if isinstance(out, dict) and isinstance(out.get("path"), str):
        return str(out["path"])
    if isinstance(out, dict) and len(out) == 1 and isinstance(next(iter(out)), str):
        return str(next(iter(out)))
    return None


def resolved_out(project: Path, out: str, source: Path) -> Path:
    """project/out resolved; LockMismatchError, naming `source` (the file that names it), for a
    path no filesystem can hold (a NUL in it, which YAML can write as "\\0")."""
    try:
        return (project / out).resolve()
    except (ValueError, OSError, RuntimeError) as exc:
        raise LockMismatchError(
            f"{source}: names the out {out!r}, which is not a path ({exc}), so the recordings it pins "
            f"cannot be checked. Fix: restore it from git (git checkout -- {source.name})."
        ) from None


def pipeline_stages(project: Path) -> set[str] | None:
    """The stage names project/dvc.yaml defines; None without a dvc.yaml."""
    path = project / PIPELINE_FILE
    if not path.is_file():
        return None
    return {str(name) for name in stages_of(load_yaml(path, "its stages"))}


def recording_owners(project: Path, recordings: Path) -> dict[Path, str] | None:
    """The stage that owns each folder of `recordings` (by resolved path) per project/dvc.yaml;
    None without a dvc.yaml."""
    path = project / PIPELINE_FILE
    if not path.is_file():
        return None
    inside = recordings.resolve()
    owners: dict[Path, str] = {}
    for name, stage in stages_of(load_yaml(path, "the recordings its stages own")).items():
        for out in filter(None, map(out_path, outs_of(stage))):
            resolved = resolved_out(project, out, path)
            if resolved.parent == inside:
                owners[resolved] = str(name)
    return owners
