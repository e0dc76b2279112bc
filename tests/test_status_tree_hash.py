"""A folder dependency's hash built without DVC's walk (pipeline.tools.status.tree_hash) is DVC's
own hash, or no answer: compared with DVC's `Output._get_hash_meta` on generated trees (odd names,
empty and nested folders, .dvcignore rules, files changed behind DVC's back)."""

from __future__ import annotations

import importlib.util
import itertools
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pipeline.tools.status.tree_hash import SPECIAL_NAMES, folder_hash_meta

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("dvc") is None, reason="needs DVC"),
    pytest.mark.skipif(sys.platform != "linux", reason="POSIX names, fifos and symlinks"),
]

PROJECT_IGNORE = "__pycache__/\n*.pyc\n*.tmp\n"  # this repository's own .dvcignore rules


@pytest.fixture(scope="module")
def repo_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    from dvc.repo import Repo

    root = tmp_path_factory.mktemp("tree-hash")
    Repo.init(str(root), no_scm=True).close()
    (root / ".dvcignore").write_text(PROJECT_IGNORE)
    yield root


@pytest.fixture(scope="module")
def repo(repo_root: Path) -> Iterator[Any]:
    from dvc.repo import Repo

    with Repo(str(repo_root)) as opened:
        yield opened


_folders = itertools.count()


def new_folder(root: Path) -> Path:
    """A folder no example has used (the state database keys files by path)."""
    return root / f"case{next(_folders)}"


def dependency(repo: Any, folder: Path) -> Any:
    from dvc.dependency import Dependency
    from dvc.stage import Stage

    stage = Stage(repo, path=os.path.join(repo.root_dir, "dvc.yaml"), wdir=repo.root_dir)
    dep = Dependency(stage, os.path.relpath(folder, repo.root_dir))
    assert dep.fs_path == str(folder)
    return dep


def dvc_hash(dep: Any) -> Any:
    """DVC's own (meta, hash_info), or the exception it raises; it also fills the state database."""
    from dvc.output import Output

    try:
        return Output._get_hash_meta(dep)
    except Exception as error:  # DVC's refusal is an answer to compare with
        return error


def write_tree(folder: Path, files: dict[tuple[str, ...], bytes], empty: list[tuple[str, ...]]) -> None:
    for parts in empty:
        (folder.joinpath(*parts)).mkdir(parents=True, exist_ok=True)
    for parts, data in files.items():
        path = os.path.join(os.fsencode(folder), *(os.fsencode(part) for part in parts))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as out:
            out.write(data)
    folder.mkdir(parents=True, exist_ok=True)


def assert_fast_is_dvcs(dep: Any) -> Any:
    """The fast answer first (it must not see anything DVC saved meanwhile), then DVC's: equal, or
    no fast answer. Returns DVC's."""
    fast = folder_hash_meta(dep)
    ours = dvc_hash(dep)
    if fast is not None:
        assert not isinstance(ours, Exception), f"DVC refused ({ours!r}) where a hash was given"
        assert fast == ours
    return ours


# Names: ordinary ones, characters with meaning elsewhere (globs, quotes, escapes, spaces, JSON's
# and .dvcignore's), non-ASCII and look-alikes of DVC's special names; never "/", NUL, "." or "..".
odd_chars = st.characters(blacklist_characters="/\0", blacklist_categories=["Cs"])
names = st.one_of(
    st.text(odd_chars, min_size=1, max_size=8),
    st.sampled_from(
        [
            "a.txt",
            "A.TXT",
            "x.tmp",
            "x.pyc",
            "__pycache__",
            "keep.tmp",
            "#note",
            "!bang",
            "*",
            "[ab]",
            "sp ace",
            "tab\tname",
            "new\nline",
            'quo"te',
            "back\\slash",
            "é",
            "é",
            "日本",
            "🙂",
            ".hidden",
            ".GIT",
            ".Dvc",
            "x.dvc",
            "dvc.yaml",
            ".gitignore",
            # What DVC's ignore regexes or a filesystem could read apart (see tree_hash): other
            # line breaks, a rule's suffix beside them, case and normalization look-alikes, an
            # undecodable byte (surrogateescape), names at the filesystem's length limit.
            "\r",
            "x.tmp\r",
            "\u2028",
            "x.tmp\u2028",
            "\x85.tmp",
            "x.tmp\n",
            "x.TMP",
            "x.tmp ",
            " x.tmp",
            "e\u0301",
            "ſ",
            "\u212a",
            "__PYCACHE__",
            "\udcff.tmp",
            "\udcff",
            "a" * 251 + ".tmp",
            "é" * 127,
        ]
    ),
).filter(lambda name: name not in {".", ".."} and len(os.fsencode(name)) <= 255)
parts = st.lists(names, min_size=1, max_size=3).map(tuple)
trees = st.tuples(
    st.dictionaries(parts, st.binary(max_size=40), max_size=8),
    st.lists(parts, max_size=3),
)
# Names no rule here ignores and DVC treats as any other.
plain_names = st.text(
    st.characters(whitelist_categories=("L", "N", "Zs"), whitelist_characters="-_.,'()é🙂"),
    min_size=1,
    max_size=8,
).filter(
    lambda name: (
        name not in {".", ".."}
        and name.casefold() not in SPECIAL_NAMES
        and not name.endswith((".tmp", ".pyc"))
        and name != "__pycache__"
    )
)
ignore_rules = st.lists(
    st.sampled_from(
        ["*.tmp", "__pycache__/", "!keep.tmp", "sub/", "/top.txt", "**/deep", "a*", "# c", "x[ab]", "é*"]
    ),
    max_size=4,
)


def utf8(name: str) -> bool:
    return not any("\udc80" <= c <= "\udcff" for c in name)


def _consistent(files: dict[tuple[str, ...], bytes], empty: list[tuple[str, ...]]) -> bool:
    """No path is both a file and a folder."""
    folders = {p[:i] for p in [*files, *empty] for i in range(1, len(p))} | set(empty)
    return not folders & set(files)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=trees.filter(lambda t: _consistent(*t)), rules=ignore_rules)
@example(tree=({("0",): b"", ("\n", ".tmp"): b""}, []), rules=[])  # CI found it: DVC hashed the .tmp
@example(tree=({("\n", ".tmp"): b""}, []), rules=[])
@example(tree=({("\udcff",): b""}, []), rules=[])  # not UTF-8: DVC refuses, and no answer is given
@example(tree=({("x.tmp\n",): b"", ("a",): b""}, []), rules=[])  # `$` before a newline: DVC ignores
@example(tree=({("\r", "x.tmp"): b"", ("\u2028", "x.tmp\u2028"): b"", ("a",): b""}, []), rules=[])
@example(tree=({("ſ", "\u212a"): b"", ("e\u0301",): b"", ("x.TMP",): b""}, []), rules=["*.tmp"])
@example(tree=({("a" * 251 + ".tmp",): b"", ("é" * 127, "x"): b""}, []), rules=[])
def test_the_hash_is_dvcs_or_none_on_generated_trees(
    repo: Any, repo_root: Path, tree: Any, rules: list[str]
) -> None:
    files, empty = tree
    outer = new_folder(repo_root)
    outer.mkdir()
    if rules:  # a .dvcignore above the folder, which DVC merges into its rules for it
        (outer / ".dvcignore").write_text("\n".join(rules) + "\n")
    folder = outer / "data"
    write_tree(folder, files, empty)
    dep = dependency(repo, folder)
    assert folder_hash_meta(dep) is None  # nothing of it is in the state database yet
    first = assert_fast_is_dvcs(dep)  # DVC hashed every file: now the fast answer can be given
    second = assert_fast_is_dvcs(dep)
    assert repr(second) == repr(first)
    plain = all(part.casefold() not in SPECIAL_NAMES and utf8(part) for p in [*files, *empty] for part in p)
    # DVC refuses only a .dvcignore inside, or a name that is not UTF-8 (its state database's).
    assert plain <= (not isinstance(first, Exception))
    # A newline in a name falls back too: DVC's ignore regexes read it otherwise (tree_hash).
    if plain and first[0].nfiles and not any("\n" in part for p in [*files, *empty] for part in p):
        assert folder_hash_meta(dep) is not None  # an ordinary tree does not fall back


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    tree=st.dictionaries(
        st.lists(plain_names, min_size=1, max_size=3).map(tuple),
        st.binary(min_size=1, max_size=40),
        min_size=1,
        max_size=6,
    ).filter(lambda f: _consistent(f, [])),
    which=st.integers(min_value=0),
    keep_mtime=st.booleans(),
)
def test_a_file_changed_behind_dvcs_back(
    repo: Any, repo_root: Path, tree: dict[tuple[str, ...], bytes], which: int, keep_mtime: bool
) -> None:
    """Same size, the bytes changed, the mtime kept or not: the answer is still DVC's (which trusts
    its state database for an unchanged inode, mtime and size), and a changed mtime is never
    answered with the old hash."""
    folder = new_folder(repo_root)
    write_tree(folder, tree, [])
    dep = dependency(repo, folder)
    before = dvc_hash(dep)
    parts_changed = sorted(tree)[which % len(tree)]
    path = os.path.join(os.fsencode(folder), *(os.fsencode(part) for part in parts_changed))
    facts = os.stat(path)
    with open(path, "r+b") as out:
        out.write(bytes([tree[parts_changed][0] ^ 0xFF]))
    if keep_mtime:
        os.utime(path, ns=(facts.st_atime_ns, facts.st_mtime_ns))
    else:
        os.utime(path, ns=(facts.st_atime_ns, facts.st_mtime_ns + 1_000_000_000))
    fast = folder_hash_meta(dep)
    after = assert_fast_is_dvcs(dep)
    assert not isinstance(before, Exception) and not isinstance(after, Exception)
    if not keep_mtime:
        assert fast is None
        assert after[1] != before[1]


def test_an_ordinary_folder_is_answered_as_dvc_answers(repo: Any, repo_root: Path) -> None:
    folder = new_folder(repo_root)
    files: dict[tuple[str, ...], bytes] = {
        (f"{n}_P", f"{n}_TRANSCRIPT.csv"): f"turns of {n}\n".encode() for n in range(300, 320)
    }
    files[("310_P", "notes.tmp")] = b"ignored by .dvcignore"
    files[("__pycache__", "x.pyc")] = b"ignored"
    write_tree(folder, files, [("empty",), ("nested", "empty")])
    dep = dependency(repo, folder)
    ours = dvc_hash(dep)
    fast = folder_hash_meta(dep)
    assert fast is not None
    assert fast == ours
    assert fast[0].nfiles == 20  # the ignored files left out, as DVC leaves them


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda f: (f / "a" / ".dvcignore").write_text("*.csv\n"), id="a .dvcignore inside"),
        pytest.param(lambda f: (f / "a" / ".dvc").mkdir(), id="a sub-repository"),
        pytest.param(
            lambda f: (f / "__pycache__" / ".dvc").mkdir(parents=True), id="an ignored sub-repository"
        ),
        pytest.param(lambda f: (f / ".git").write_text("gitdir: x"), id=".git"),
        pytest.param(lambda f: (f / "link").symlink_to(f / "a" / "x.csv"), id="a file symlink"),
        pytest.param(lambda f: (f / "dirlink").symlink_to(f / "a"), id="a folder symlink"),
        pytest.param(lambda f: (f / "gone").symlink_to(f / "nowhere"), id="a broken symlink"),
        pytest.param(lambda f: os.mkfifo(f / "fifo"), id="a fifo"),
        pytest.param(lambda f: open(os.fsencode(f) + b"/\xff.csv", "wb").close(), id="a non-UTF-8 name"),
    ],
)
def test_anything_unusual_is_left_to_dvc(repo: Any, repo_root: Path, make: Any) -> None:
    folder = new_folder(repo_root)
    write_tree(folder, {("a", "x.csv"): b"x"}, [])
    dep = dependency(repo, folder)
    dvc_hash(dep)
    assert folder_hash_meta(dep) is not None  # the plain folder is answered
    make(folder)
    if not any(entry.is_fifo() for entry in folder.iterdir()):  # DVC would wait for a writer
        dvc_hash(dep)  # whatever DVC makes of it, with its state filled where it can be
    assert folder_hash_meta(dep) is None


def test_a_file_dvc_has_not_hashed_is_left_to_dvc(repo: Any, repo_root: Path) -> None:
    folder = new_folder(repo_root)
    write_tree(folder, {("a", "x.csv"): b"x"}, [])
    dep = dependency(repo, folder)
    dvc_hash(dep)
    (folder / "b.csv").write_text("new")
    assert folder_hash_meta(dep) is None
    assert folder_hash_meta(dep) is None  # asking again saved nothing: DVC's own call does
    dvc_hash(dep)
    assert folder_hash_meta(dep) is not None


def test_a_filesystem_that_finds_either_case_is_left_to_dvc(repo: Any, repo_root: Path) -> None:
    """Simulated: the folder's name with its case swapped leads to the same folder."""
    folder = new_folder(repo_root)
    write_tree(folder, {("x.csv",): b"x"}, [])
    dep = dependency(repo, folder)
    dvc_hash(dep)
    assert folder_hash_meta(dep) is not None
    (folder.parent / folder.name.swapcase()).symlink_to(folder)
    assert folder_hash_meta(dep) is None


def test_a_file_dependency_and_a_folder_outside_the_repository_are_left_to_dvc(
    repo: Any, repo_root: Path, tmp_path: Path
) -> None:
    (repo_root / "single.csv").write_text("x")
    dep = dependency(repo, repo_root / "single.csv")
    dvc_hash(dep)
    assert folder_hash_meta(dep) is None
    write_tree(tmp_path / "out", {("x.csv",): b"x"}, [])
    outside = dependency(repo, tmp_path / "out")
    dvc_hash(outside)
    assert folder_hash_meta(outside) is None


# --- in `judgeloop status`: the data folder hashed without DVC's walk ---------------------------


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    import subprocess

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DVC_NO_ANALYTICS", "1")
    for item in range(4):
        (tmp_path / "data" / f"{item}_P").mkdir(parents=True)
        (tmp_path / "data" / f"{item}_P" / f"{item}_TRANSCRIPT.csv").write_text(f"turn of {item}\n")
    stage = f"{sys.executable} -c \"open('{{0}}.txt', 'w').write('{{0}}')\""
    Path("dvc.yaml").write_text(
        "stages:\n"
        f"  first:\n    cmd: {stage.format('first')}\n    deps: [data]\n"
        "    outs: [{first.txt: {cache: false}}]\n"
        f"  second:\n    cmd: {stage.format('second')}\n    deps: [data, first.txt]\n"
        "    outs: [{second.txt: {cache: false}}]\n"
    )
    Path(".dvcignore").write_text(PROJECT_IGNORE)
    for args in (["init", "--no-scm", "-q"], ["repro", "-q"]):
        subprocess.run([sys.executable, "-m", "dvc", *args], check=True, capture_output=True)
    return tmp_path


def test_status_hashes_the_data_folder_without_dvcs_walk(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dvc import output

    from pipeline.tools.status.dvc_state import dvc_view

    built: list[str] = []
    original = output.Output._build

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        built.append(Path(str(args[1])).name)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(output.Output, "_build", counted)
    assert dvc_view().changed == {}
    assert "data" not in built
    (project / "data" / "2_P" / "2_TRANSCRIPT.csv").write_text("turn of 2, changed\n")
    assert sorted(dvc_view().changed or {}) == ["first", "second"]
    assert built.count("data") == 1  # the changed file is not in DVC's state: DVC hashed it
