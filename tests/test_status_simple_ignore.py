"""The .dvcignore decision without DVC's regexes (pipeline.tools.status.simple_ignore) is DVC's own
`DvcIgnorePatterns.matches` for every entry of a pruned walk, or not given."""

from __future__ import annotations

import importlib.util

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pipeline.tools.status.simple_ignore import simple_matcher

pytestmark = pytest.mark.skipif(importlib.util.find_spec("dvc") is None, reason="needs DVC")

ROOT = "/r"
literal = st.text(st.sampled_from("abc.xé_ -ſKE\u0301\u2028"), min_size=1, max_size=4)
simple_rules = st.one_of(
    literal,
    literal.map(lambda s: s + "/"),
    literal.map(lambda s: "*" + s),
    literal.map(lambda s: "*" + s + "/"),
)
any_rules = st.one_of(
    simple_rules, st.sampled_from(["!a", "a/b", "/a", "**/a", "a*", "[ab]", "?", "a\\*", "*", "a b/"])
)
# Characters a regex or a gitignore rule could read apart: every line break but "\n" (which
# tree_hash refuses, see test_a_newline_above_is_where_dvc_and_the_names_differ), globs, escapes,
# comment and negation marks, spaces, look-alikes that case-fold or normalize to the rules' own
# ("ſ" folds to "s", "K" is the Kelvin sign, "e\u0301" is "é" decomposed) and an undecodable byte.
ODD = "\r\x0b\x0c\x1c\x85\u2028\u2029\t\\[]?!#*ſKİßE\u0301\udcff\x00"
name = st.text(st.sampled_from("abc.xé_ -*" + ODD), min_size=1, max_size=6).filter(
    lambda n: n not in {".", ".."}
)
# Names built from the rules' own literals, so that many entries are ignored.
near = st.builds(
    lambda head, tail: head + tail, st.sampled_from(["", "a", "x.", "é", "\r", "\u2028", "\x85"]), literal
).filter(lambda n: n not in {".", ".."})
names = st.one_of(name, near)


def dvc_patterns(rules: list[str]) -> object:
    from dvc.ignore import DvcIgnorePatterns

    return DvcIgnorePatterns([".hg/", ".git/", ".git", ".dvc/", *rules], ROOT, "/")


@settings(max_examples=400, deadline=None)
@given(
    rules=st.lists(any_rules, max_size=5),
    above=st.lists(names, max_size=3),
    below=st.lists(names, max_size=2),
    entry=names,
    is_dir=st.booleans(),
)
def test_the_decision_is_dvcs_or_none(
    rules: list[str], above: list[str], below: list[str], entry: str, is_dir: bool
) -> None:
    pattern = dvc_patterns(rules)
    walked = "/".join([ROOT, *above])
    match = simple_matcher(pattern, walked)
    if match is None:
        return
    # A folder of the pruned walk: every folder from `walked` down is one DVC does not ignore.
    root = walked
    for part in below:
        if pattern.matches(root, part, True):  # type: ignore[attr-defined]
            return
        root = f"{root}/{part}"
    assert match(entry, is_dir) == pattern.matches(root, entry, is_dir)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("walked", "entry"),
    [("/r/\n", "x.tmp"), ("/r", "x.tmp\n"), ("/r/a\nb/c", "x.tmp")],
)
def test_a_newline_is_where_dvc_and_the_names_differ(walked: str, entry: str) -> None:
    """DVC's rule regexes (`^(?:.+/)?[^/]*\\.tmp(?:/|$)`) read a newline apart: `.` does not match it
    and `$` matches before it. The only character where the name's own suffix and DVC disagree
    (no other differs, above: every other line break, globs, look-alikes), so tree_hash refuses a
    name with a newline rather than this matcher answering for one."""
    pattern = dvc_patterns(["*.tmp"])
    match = simple_matcher(pattern, walked)
    assert match is not None
    assert match(entry, False) != pattern.matches(walked, entry, False)  # type: ignore[attr-defined]


def test_simple_rules_are_answered_and_others_are_not() -> None:
    assert simple_matcher(dvc_patterns(["__pycache__/", "*.pyc", "*.tmp"]), ROOT + "/data") is not None
    for rule in ("!keep.tmp", "sub/x", "/top", "**/deep", "a*", "x[ab]", "?", "*"):
        assert simple_matcher(dvc_patterns([rule]), ROOT + "/data") is None
    assert simple_matcher(dvc_patterns(["data/"]), ROOT + "/data/x") is None  # a folder above is ignored
    assert simple_matcher(dvc_patterns(["*.tmp"]), "/elsewhere") is None


@settings(max_examples=400, deadline=None)
@given(rules=st.lists(simple_rules, min_size=1, max_size=4), data=st.data(), is_dir=st.booleans())
def test_names_the_rules_name_are_decided_as_dvc_decides(
    rules: list[str], data: st.DataObject, is_dir: bool
) -> None:
    """Entries made from the rules themselves (the name, or any head before a suffix), so that most
    are ignored, in the walked folder and one folder below."""
    pattern = dvc_patterns(rules)
    match = simple_matcher(pattern, ROOT + "/w")
    assume(match is not None)  # a literal with spaces at its ends is left to DVC
    assert match is not None
    rule = data.draw(st.sampled_from(rules)).rstrip("/")
    entry = data.draw(st.sampled_from(["", "a", "x."])) + rule.lstrip("*") if rule.startswith("*") else rule
    # The folder one down only where DVC's walk enters it (a rule like `*b/` ignores `sub` itself).
    walked = [ROOT + "/w"] + ([] if pattern.matches(ROOT + "/w", "sub", True) else [ROOT + "/w/sub"])  # type: ignore[attr-defined]
    for root in walked:
        assert match(entry, is_dir) == pattern.matches(root, entry, is_dir)  # type: ignore[attr-defined]
