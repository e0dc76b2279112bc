"""Each stage's code as one small file that the stage depends on: dvc.yaml's `code` stage (issue 31).

A stage's code is every module file a fresh interpreter loads to run it (pipeline.tools.dvc_yaml).
Listed under every stage's deps, those files were most of dvc.yaml and dvc.lock (1,199 entries over
16 stages, 85 % of the lock's lines), each one hashed, looked up and written back by DVC after
every stage. The same information, each file once:

- `judgeloop dvc-yaml` writes IMPORTS (stages/code/imports.json): each stage's module files;
- the `code` stage (`python -m stages.code_digests`) depends on IMPORTS and on each of those files
  once, and writes one digest per stage, stages/code/STAGE.json: the stage's files and the sha256
  of each, as canonical JSON; a digest whose text would not change is not written again;
- each other stage depends on its own digest instead of its modules.

A change to a module reruns the code stage, which changes the digests of exactly the stages that
load it, so DVC reruns those, as when each listed the module itself. Before the code stage runs,
`pending` says which stages' digests it will change and by which files, so that `judgeloop status`
and the pre-flight still name the module (and `changed_files` reads the change from a digest the
code stage has written already).

Only the standard library, orjson and pipeline.llm.files are imported: the code stage starts in a blink.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path, PurePosixPath
from typing import Any

import orjson

from pipeline.errors import ConfigError
from pipeline.llm.files import (
    atomic_write,
    folder_replaced_by_copy,
    in_command,
    link_leading_out,
    named,
    path_under,
    read_regular,
    refuse_links,
    replaced_by_copy,
)

STAGE = "code"  # the code stage's name in dvc.yaml
COMMAND = "python -m stages.code_digests"
FOLDER = "stages/code"
IMPORTS = f"{FOLDER}/imports.json"
GENERATED_BY = "judgeloop dvc-yaml"
MAX_BYTES = 16 * 2**20  # a module file, IMPORTS or a digest: far more than any of them holds
STAGE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,99}")  # what DVC accepts, and one file name
RESERVED = {STAGE, "imports"}  # names a design's stage cannot take (the code stage, IMPORTS)
FIX = "Fix: run `judgeloop dvc-yaml`, which writes it from the stages' imports."
LINKED_FIX = f"then `judgeloop dvc-yaml` writes {IMPORTS} again in a folder of the project's own"

__all__ = ["changed_files", "digest_path", "explained", "holds", "imports_text", "pending", "write_digests"]


def digest_path(stage: str) -> str:
    """The digest of `stage`'s code, relative to the project."""
    return f"{FOLDER}/{stage}.json"


def _canonical(data: Any) -> str:
    """JSON with sorted keys, one entry a line: the same data gives the same bytes, and a person
    (or `git diff`) reads it."""
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def imports_text(imports: dict[str, list[str]]) -> str:
    """IMPORTS' text: each stage's module files, sorted."""
    stages = {stage: sorted(set(files)) for stage, files in imports.items()}
    return _canonical({"generated_by": GENERATED_BY, "stages": stages})


def _digest_text(stage: str, hashes: dict[str, str]) -> str:
    return _canonical({"stage": stage, "files": hashes})


def _inside(path: str) -> bool:
    """A relative path that stays in the project: not absolute, no '..', no NUL or backslash."""
    pure = PurePosixPath(path)
    odd = "\0" in path or "\\" in path
    return bool(path) and not odd and not pure.is_absolute() and ".." not in pure.parts


def _parsed(data: bytes) -> Any:
    """JSON that whoever commits may have written: orjson, whose depth bound makes a nesting past it
    a ValueError like any other bad JSON (json.loads raised RecursionError, a traceback)."""
    return orjson.loads(data)


def holds(path: Path, text: str) -> bool:
    """Whether the file at `path` holds `text`, read as one regular file, bounded (never a pipe
    waited on, nor /dev/zero read until the memory runs out)."""
    try:
        return read_regular(path, MAX_BYTES) == text.encode("utf-8")
    except OSError:  # none, a folder, a pipe, a device, past the bound
        return False


def read_imports(root: Path) -> dict[str, list[str]]:
    """IMPORTS, checked (whoever wrote it, it names only stage names and paths inside the project),
    never read through a folder linked out of the project (_refuse_folder_out)."""
    _refuse_folder_out(root)
    try:
        data = _parsed(read_regular(root / IMPORTS, MAX_BYTES))
    except FileNotFoundError:
        raise ConfigError(f"{IMPORTS} is missing. {FIX}") from None
    except (OSError, ValueError) as exc:  # not a file, past the bound, not UTF-8 or not JSON
        raise ConfigError(f"{IMPORTS}: not readable ({exc}). {FIX}") from None
    stages = data.get("stages") if isinstance(data, dict) else None
    if not isinstance(stages, dict):
        raise ConfigError(f'{IMPORTS}: no "stages" object. {FIX}')
    for stage, files in stages.items():
        if not STAGE_NAME.fullmatch(stage) or stage in RESERVED:
            raise ConfigError(f"{IMPORTS}: {stage!r} is not a stage's name. {FIX}")
        if not isinstance(files, list) or not all(isinstance(f, str) and _inside(f) for f in files):
            raise ConfigError(f"{IMPORTS}: stage {stage}'s files are not paths inside the project. {FIX}")
    return stages


def _refuse_folder_out(root: Path) -> None:
    """ConfigError, before IMPORTS is read, where FOLDER lies outside the project through a link on
    its way (`stages -> /elsewhere`, which refuse_links of FOLDER alone does not see): IMPORTS read
    there would name the files the code stage hashes."""
    link = link_leading_out(str(root), FOLDER)
    if link is None:
        return
    name, target = os.path.relpath(link, root), os.path.realpath(link)
    if name == FOLDER:
        fix = f"remove the link (rm -- {in_command(link)}), {LINKED_FIX}"
    else:
        fix = f"put the folder itself in place of the link ({folder_replaced_by_copy(link, target)})"
    raise ConfigError(
        f"{IMPORTS}: not read: {named(name)} is a link to {named(target)}, which lies outside the project "
        f"({named(os.path.realpath(root))}); the code stage reads and writes only inside it. Fix: {fix}, "
        "or make it a link inside the project."
    )


def _refuse_link_out(root: Path, path: str) -> None:
    """ConfigError where a module file is reached through a link out of the project (the file, or a
    folder above it): a pull request can commit `pipeline/x.py -> /elsewhere`, and the code stage
    would write the sha256 of another file of this machine into a digest (and DVC into dvc.lock)."""
    project = os.path.realpath(root)
    if path_under(os.path.realpath(root / path), project):
        return
    link = link_leading_out(str(root), path) or str(root / path)
    name = os.path.relpath(link, root)
    if name == path:
        fix = f"put the file itself in place of the link ({replaced_by_copy(link)})"
    else:
        fix = f"make {named(name)} a folder of the project's own, not a link"
    raise ConfigError(
        f"{named(path)} (named by {IMPORTS}): {named(name)} is a link to {named(os.path.realpath(link))}, "
        f"which lies outside the project ({named(project)}); the code stage hashes only files inside it. "
        f"Fix: {fix}, or make it "
        "a link inside the project."
    )


def _sha256(root: Path, path: str) -> str | None:
    """sha256 of a module file's bytes; None where there is no file. A file reached through a link
    out of the project is refused (_refuse_link_out)."""
    _refuse_link_out(root, path)
    try:
        return "sha256:" + hashlib.sha256(read_regular(root / path, MAX_BYTES)).hexdigest()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"{path} (named by {IMPORTS}): not readable ({exc}).") from None


def _hashes(root: Path, imports: dict[str, list[str]]) -> dict[str, str | None]:
    """Each file that any stage loads, hashed once."""
    return {path: _sha256(root, path) for path in sorted({f for files in imports.values() for f in files})}


def _recorded(root: Path, stage: str) -> dict[str, str] | None:
    """The files and hashes the digest of `stage` holds now; None where it cannot be read."""
    try:
        data = _parsed(read_regular(root / digest_path(stage), MAX_BYTES))
    except (OSError, ValueError):
        return None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        return None
    return files


def write_digests(root: Path) -> list[str]:
    """What the code stage does: each stage's digest from IMPORTS and the files it names, written
    where its text changes (a file of a digest the same is left alone, so DVC sees it unchanged).
    The stages whose digest was written, in IMPORTS' order."""
    folder = root / FOLDER
    refuse_links(folder, FOLDER, LINKED_FIX, itself=True)  # IMPORTS read, digests written, inside only
    imports = read_imports(root)
    hashes = _hashes(root, imports)
    written = []
    for stage, files in imports.items():
        missing = [f for f in files if hashes[f] is None]
        if missing:
            raise ConfigError(
                f"stage {stage} loads {missing[0]} ({IMPORTS}), which is not there: a module removed or "
                f"moved since dvc.yaml was written. {FIX}"
            )
        text = _digest_text(stage, {f: str(hashes[f]) for f in files})
        path = root / digest_path(stage)
        if not holds(path, text):
            folder.mkdir(parents=True, exist_ok=True)
            atomic_write(path, text)
            written.append(stage)
    return written


def _compared(before: dict[str, str], now: dict[str, str | None]) -> dict[str, str]:
    """file -> how it changed, in DVC's words for a changed dep (modified, new, deleted)."""
    changes = {f: "modified" for f, h in now.items() if h is not None and f in before and before[f] != h}
    changes.update({f: "new" for f, h in now.items() if h is not None and f not in before})
    changes.update({f: "deleted" for f in before if now.get(f) is None})
    return dict(sorted(changes.items()))


def pending(root: Path) -> dict[str, dict[str, str]]:
    """Stage -> the files by which the code stage, run now, would change its digest (file -> how).
    Nothing where IMPORTS cannot be read (the code stage says why when it runs) and nothing for a
    stage without a digest yet (DVC says that itself: its dep is missing)."""
    try:
        imports = read_imports(root)
        hashes = _hashes(root, imports)
    except ConfigError:
        return {}
    found = {}
    for stage, files in imports.items():
        before = _recorded(root, stage)
        changes = _compared(before, {f: hashes[f] for f in files}) if before is not None else {}
        if changes:
            found[stage] = changes
    return found


def changed_files(root: Path, stage: str, before_text: bytes) -> dict[str, str]:
    """The files by which the digest of `stage` on disk differs from `before_text` (an earlier digest
    of it, as dvc.lock locked it): file -> how. Nothing where either cannot be read."""
    try:
        data = _parsed(before_text)
    except ValueError:
        return {}
    before = data.get("files") if isinstance(data, dict) else None
    now = _recorded(root, stage)
    if not isinstance(before, dict) or not all(isinstance(v, str) for v in before.values()) or now is None:
        return {}
    return _compared(before, dict(now))


def described(changes: dict[str, str]) -> str:
    """As pipeline.tools.status words DVC's status: `changed deps: FILE (how), ...`."""
    return "changed deps: " + ", ".join(f"{path} ({how})" for path, how in changes.items())


def _locked_text(root: Path, stage: str, locked_md5: str | None) -> bytes | None:
    """The digest of `stage` that dvc.lock locks (md5 `locked_md5`), where git's HEAD holds it."""
    import subprocess

    if not locked_md5:
        return None
    try:
        command = ["git", "show", f"HEAD:{digest_path(stage)}"]
        shown = subprocess.run(command, cwd=root, capture_output=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return shown if hashlib.md5(shown).hexdigest() == locked_md5 else None


def explained(changed: dict[str, str], root: Path, locked: dict[str, str]) -> dict[str, str]:
    """DVC's reasons (stage -> `changed deps: ...`) with each stage's code named: the files by which
    the code stage, out of date, will change the stage's digest (pending), and, where DVC names the
    digest itself (the code stage has run since the stage), the files by which it differs from the
    digest dvc.lock locks (`locked`: stage -> that md5), read from git's HEAD where it is that one."""
    said = dict(changed)
    if STAGE in changed:
        for stage, changes in pending(root).items():
            said[stage] = "; ".join(filter(None, (said.get(stage), described(changes))))
    for stage, reason in changed.items():
        before = _locked_text(root, stage, locked.get(stage)) if digest_path(stage) in reason else None
        changes = changed_files(root, stage, before) if before is not None else {}
        if changes:
            said[stage] = f"{said[stage]} ({described(changes).removeprefix('changed deps: ')})"
    return said
