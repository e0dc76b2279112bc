"""Fuzzing how `judgeloop diff <revision>` writes a revision's run out of `git archive`'s tar
(pipeline.tools.diff.runs._write_member): members of any kind, names and link targets, in any
order, a name given twice (a tree git would flag, but `git archive` writes as it finds it, and a
fetched branch's objects are not checked unless transfer.fsckObjects is set). The property: each
member is written inside the run's folder or refused with a clear error; nothing is ever written,
made or linked outside it."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
import tempfile
from functools import partial
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pipeline.errors import JudgeloopError
from pipeline.tools.diff.runs import _write_member, run_folder
from tests.fuzz.support import clear_or_correct, fuzz, only_inside

COMMIT = "0" * 40
parts = st.sampled_from(["a", "b", "recordings", "judge", "calls.jsonl", ".", "..", "", "é", "e\u0301", "A"])
names = st.lists(parts, min_size=1, max_size=4).map("/".join)
targets = st.one_of(
    names, names.map(lambda name: "/" + name), st.sampled_from([".", "..", "../..", "/tmp", "a/../.."])
)
members = st.lists(
    st.tuples(
        st.sampled_from(["file", "dir", "link", "fifo", "hard"]),
        names,
        st.one_of(targets, st.binary(max_size=8)),
    ),
    min_size=1,
    max_size=6,
)


def archive(chosen: list[tuple[str, str, object]]) -> bytes:
    """A tar as git archive writes one, holding `chosen` as given (no check of its own)."""
    kinds = {
        "file": tarfile.REGTYPE,
        "dir": tarfile.DIRTYPE,
        "link": tarfile.SYMTYPE,
        "fifo": tarfile.FIFOTYPE,
    }
    kinds["hard"] = tarfile.LNKTYPE
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for kind, name, what in chosen:
            info = tarfile.TarInfo(name)
            info.type = kinds[kind]
            data = what if isinstance(what, bytes) and kind == "file" else b""
            if kind in ("link", "hard"):
                info.linkname = what if isinstance(what, str) else "calls.jsonl"
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def write_out(data: bytes, into: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in tar:
            clear_or_correct(partial(_write_member, tar, member, into, COMMIT))


def _outside_untouched(base: Path, into: Path) -> None:
    only_inside(base, into)
    for folder, dirs, files in os.walk(into):  # every link left inside points inside
        for name in dirs + files:
            path = Path(folder, name)
            if path.is_symlink():
                assert Path(os.path.realpath(path)).is_relative_to(os.path.realpath(into)), path


@fuzz
@given(chosen=members)
@example(chosen=[("link", "a", "."), ("link", "a/b", ".."), ("file", "a/b/evil", b"x")])
@example(chosen=[("link", "a", "."), ("link", "a/b", "..")])
@example(chosen=[("link", "a", "b"), ("file", "a", b"x")])
def test_a_revision_s_archive(
    tmp_path_factory: pytest.TempPathFactory, chosen: list[tuple[str, str, object]]
) -> None:
    base = tmp_path_factory.mktemp("archive")
    into = base / "run"
    into.mkdir()
    write_out(archive(chosen), into)
    _outside_untouched(base, into)


def test_a_chain_of_links_cannot_carry_a_file_out_of_the_run(tmp_path: Path) -> None:
    """Found while writing the fuzzing: "a" -> "." then "a/b" -> ".." passed the check of each
    link's target read from its name ("a/.." is the run itself), but on disk "a/b" lies in the
    run, so ".." leaves it, and the file "a/b/evil" was written beside the run."""
    into = tmp_path / "run"
    into.mkdir()
    data = archive([("link", "a", "."), ("link", "a/b", ".."), ("file", "a/b/evil", b"x")])
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        written = []
        for member in tar:
            try:
                _write_member(tar, member, into, COMMIT)
                written.append(member.name)
            except JudgeloopError as exc:
                assert member.name in str(exc)
    assert written == ["a"] and sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def _git(repo: Path, *args: str, data: bytes | None = None) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], input=data, capture_output=True, check=True)
    return done.stdout.decode().strip()


def _tree(repo: Path, entries: list[tuple[str, str, str]]) -> str:
    """A tree object holding `entries` as given, names twice included (git mktree would refuse)."""
    raw = b"".join(f"{mode} {name}".encode() + b"\0" + bytes.fromhex(sha) for mode, name, sha in entries)
    return _git(repo, "hash-object", "-t", "tree", "--literally", "-w", "--stdin", data=raw)


def test_a_revision_whose_tree_names_an_entry_twice_writes_nothing_outside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attack end to end: a commit (as a fetched branch may hold it) whose recordings/ names
    "a" twice, as a link to "." and as a folder whose "b" is a link to "../.." and a folder holding
    "evil". `git archive` writes every entry; the old writer put "evil" beside the run's folder."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)

    def blob(data: bytes) -> str:
        return _git(repo, "hash-object", "-w", "--stdin", data=data)

    inner = _tree(repo, [("100644", "evil", blob(b"pwned\n"))])
    a = _tree(repo, [("120000", "b", blob(b"../..")), ("40000", "b", inner)])
    recordings = _tree(repo, [("120000", "a", blob(b".")), ("40000", "a", a)])
    top = _tree(repo, [("100644", "params.yaml", blob(b"llm: {}\n")), ("40000", "recordings", recordings)])
    commit = _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit-tree", top, "-m", "run")
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    with pytest.raises(JudgeloopError, match=r"recordings/a.*not a plain file"), run_folder(commit, repo):
        pass
    assert list(temporary.iterdir()) == []
