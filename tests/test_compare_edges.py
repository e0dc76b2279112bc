"""`judgeloop compare` at the edges review23 found past compare-review's mends: a number's cells
checked against an independent formatting (what 11 columns can tell apart, a change never one the
rounding made, a positive change's sign never touching the number before it, a huge int against
inf or NaN); params keyed by numbers apart from a list; a key that cannot spell a change; widths as
the wcwidth library gives them; the pointer to `judgeloop diff` a command a shell reads back;
`judgeloop exp list` naming a list param whole, as it did."""

from __future__ import annotations

import math
import shlex
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from wcwidth import wcswidth

from pipeline.llm.terminal import shown
from pipeline.tools.columns import columns, fit
from pipeline.tools.compare import _pointer, _row, render
from pipeline.tools.compare_numbers import VALUE, cells
from pipeline.tools.compare_params import params_changes
from pipeline.tools.compare_runs import Unreadable
from pipeline.tools.exp_list import changed_params
from tests.conftest import ROOT
from tests.test_experiments import _commit, _repo

numbers = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(-(10**30), 10**30),
    st.floats(min_value=-1e-3, max_value=1e-3),
    st.builds(lambda x, d: x + d, st.floats(-1e6, 1e6), st.sampled_from([1e-12, 1e-9, 1e-6, 1e-5, 5e-5])),
)


def _unit(text: str) -> Decimal:
    """The unit of a shown number's last digit (1.2346e+20: 1e16; 0.25: 0.01; 12: 1)."""
    mantissa, _, exponent = text.lstrip("+-").partition("e")
    places = len(mantissa.partition(".")[2])
    return Decimal(10) ** (int(exponent or 0) - places)


def _honest(text: str, value: Decimal) -> bool:
    """Whether `text` is `value` rounded to its last digit (half a unit off at most)."""
    return abs(Decimal(text) - value) <= _unit(text) / 2


def _told_apart(a: Decimal, b: Decimal, shown: str, width: int = VALUE - 1) -> bool:
    """Whether a plain or e-notation spelling of at most `width` characters, and no fewer digits
    than `shown` has, shows a and b apart."""
    mantissa, e, _ = shown.partition("e")
    digits = len(mantissa.partition(".")[2])
    plain = range(0 if e else digits, 40)
    spellings = [f"{{:.{d}f}}" for d in plain] + [f"{{:.{d}e}}" for d in range(digits if e else 0, width)]
    for spec in spellings:
        x, y = spec.format(a), spec.format(b)
        if len(x) <= width and len(y) <= width and x != y:
            return True
    return False


@settings(max_examples=400, deadline=None)
@given(numbers, numbers)
def test_cells_against_an_independent_formatting(old: float | int, new: float | int) -> None:
    """Each shown number is its value rounded; "=" only where the cells are alike, and alike cells
    with a change only where no 11 columns could tell the two apart; a change shown is the exact
    change rounded, never zero, of its sign; the row's three cells stand apart."""
    a, b, change = cells(old, new)
    exact = Decimal(new) - Decimal(old)
    assert _honest(a, Decimal(old)) and _honest(b, Decimal(new)), (a, b)
    if change == "=":
        assert a == b, (old, new, a, b)
        return
    assert exact != 0 and Decimal(change) != 0 and (Decimal(change) > 0) == (exact > 0), (old, new, change)
    assert _honest(change, exact), (old, new, change)
    if a == b:
        assert not _told_apart(Decimal(old), Decimal(new), a), (old, new, a, b, change)
    assert _row("x", a, b, change).split() == ["x", a, b, change]


def test_a_positive_change_never_touches_the_number_before_it() -> None:
    """Was `12345678901+1.2346e+9`: an 11-column number and a 10-column change, read as one."""
    a, b, change = cells(11111111111, 12345678901)
    assert _row("items", a, b, change).split() == ["items", "11111111111", "12345678901", change]
    assert change.startswith("+1.23")


def test_numbers_alike_in_their_cells_get_the_digits_that_tell_them_apart() -> None:
    """Was `1.2346e+20  1.2346e+20  +999997440`: e-notation had 4 digits however many fit."""
    a, b, change = cells(1.23456789012e20, 1.23458789013e20)
    assert a != b and change != "="


def test_a_huge_int_against_inf_or_nan_is_no_traceback() -> None:
    """Was OverflowError (math.isnan of an int past 1e308) from a metrics file's 400-digit number."""
    assert cells(10**400, math.inf)[2] == "+inf"
    assert cells(-(10**400), -math.inf)[2] == "-inf"
    assert cells(10**400, math.nan)[2] == ""
    assert cells(math.nan, 10**400)[2] == ""


def test_a_mapping_keyed_by_numbers_is_not_a_list() -> None:
    """`m: {0: x}` against `m: [x]` was no difference: the int key 0 was spelled as the index [0]."""
    assert params_changes([{"params.yaml": {"m": {0: "x"}}}, {"params.yaml": {"m": ["x"]}}]) != []
    lines = params_changes(
        [{"params.yaml": {"m": {1: "x", None: 2}}}, {"params.yaml": {"m": {1: "y", None: 2}}}]
    )
    assert lines == ["  m{1}: 'x' → 'y'"]


def test_a_key_cannot_spell_another_change() -> None:
    """A key holding `: ` and ` → ` read as the change of another key (`judge: 1 → 2, x: 5 → 6`)."""
    lines = params_changes([{"params.yaml": {"judge: 1 → 2, x": 5}}, {"params.yaml": {"judge: 1 → 2, x": 6}}])
    assert lines == ["  ['judge: 1 → 2, x']: 5 → 6"]
    assert params_changes([{"params.yaml": {"max-tokens_2": 1}}, {"params.yaml": {"max-tokens_2": 2}}]) == [
        "  max-tokens_2: 1 → 2"
    ]


keys = st.one_of(st.text(max_size=6), st.integers(-3, 3), st.booleans(), st.none())
trees = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(), st.text(max_size=4)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=3)),
    max_leaves=12,
)


def _canonical(value: Any) -> Any:
    """The value with its types in it, NaN equal to NaN, a mapping's order not (the oracle)."""
    if isinstance(value, dict):
        return ("map", sorted(((_canonical(k), _canonical(v)) for k, v in value.items()), key=repr))
    if isinstance(value, list):
        return ("list", [_canonical(item) for item in value])
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")
    return (type(value).__name__, value)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(keys, trees, max_size=4), st.dictionaries(keys, trees, max_size=4))
def test_any_params_with_keys_of_any_type(old: dict[Any, Any], new: dict[Any, Any]) -> None:
    """YAML keys are not only texts (DVC reads `{0: x}` with an int key): a line appears exactly
    where the two params differ, as a typed tree."""
    lines = params_changes([{"params.yaml": old}, {"params.yaml": new}])
    assert (lines == []) == (_canonical(old) == _canonical(new)), lines


printable = st.characters(blacklist_categories=("Cs", "Co", "Cn"))


@settings(max_examples=300, deadline=None)
@given(st.text(printable, max_size=60), st.integers(2, 60))
def test_widths_are_the_terminals(text: str, width: int) -> None:
    """columns() is wcwidth's width of a shown text, and fit() keeps to its width by it."""
    text = shown(text, one_line=True)
    assert columns(text) == wcswidth(text)
    cut = fit(text, width)
    assert wcswidth(cut) <= width
    assert cut == text or cut.endswith("…")


def test_widths_of_marks_and_fillers() -> None:
    """Devanagari vowel signs and a Hangul filler take no column of their own; an emoji with a skin
    tone takes two: the hand count gave हिंदी 5, ㅤ 2 and 👍🏽 4."""
    assert columns("हिंदी") == 4
    assert columns("\u3164") == 0
    assert columns("👍🏽") == 2
    assert fit("e\u0301" * 10, 4) == "e\u0301" * 3 + "…"


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.text(
            st.characters(codec="utf-8", blacklist_categories=("Cs", "Cc", "Cf", "Zl", "Zp")), min_size=1
        ),
        min_size=2,
        max_size=2,
    )
)
def test_the_pointer_is_a_command_a_shell_reads_back(names: list[str]) -> None:
    """The suggested `judgeloop diff` reads back, by a POSIX shell's rules, to the two names; or it is
    said in words (too wide, or a name holding what is shown as an escape, which pasted is typed)."""
    command = _pointer(names, ["paper"])[1].strip()
    assume(not command.startswith(("judgeloop diff A B", "judgeloop diff, each run")))  # in words
    assert shlex.split(command) == ["judgeloop", "diff", *names, "--design", "paper"]


def test_the_pointer_quotes_what_zsh_or_a_paste_would_bend() -> None:
    """HEAD^ is a pattern to zsh's extended glob, and `=x` a command's path; a name shown with an
    escape (a bidi control) pasted would be the escape's characters, not the name."""
    assert _pointer(["HEAD^", "=x"], ["paper"])[1] == "  judgeloop diff 'HEAD^' '=x' --design paper"
    assert _pointer(["a\u202eb", "HEAD"], ["paper"])[1] == "  judgeloop diff A B, A and B the two runs above"
    assert _pointer(["my run", "$HOME"], ["paper"])[1] == "  judgeloop diff 'my run' '$HOME' --design paper"


def test_exp_list_names_a_list_param_whole_as_it_did() -> None:
    """exp list printed `m=['a', 'b', 'c']` for an experiment that set the list (as -S sets it);
    compare-review's rule made it `m[2]=c`. By type still: 1 → 1.0 is named, NaN → NaN is not."""
    old = {"params.yaml": {"m": ["a", "b"], "t": 1, "n": math.nan, "s": {"k": 2}}}
    new = {"params.yaml": {"m": ["a", "b", "c"], "t": 1.0, "n": math.nan, "s": {"k": 3}}}
    assert changed_params(old, new) == ["m=['a', 'b', 'c']", "s.k=3", "t=1.0"]
    assert changed_params(old, {"params.yaml": {**new["params.yaml"], "m": ["a", "b"]}}) == ["s.k=3", "t=1.0"]
    assert changed_params({"params.yaml": {"m": [1]}}, {"params.yaml": {"m": [1.0]}}) == ["m=[1.0]"]


STAGE = """\
stages:
  aggregate:
    cmd: python write.py
    params: [aggregate.metrics_out]
    metrics:
      - ${aggregate.metrics_out}:
          cache: false
"""


def test_a_list_turned_into_a_mapping_keyed_by_numbers_is_a_change_in_dvc(tmp_path: Path) -> None:
    """In a real git + DVC project: params.yaml's `extra: [x]` became `extra: {0: x}` and compare
    said `params: the same` (DVC reads the key 0 as an int)."""
    params = (ROOT / "params.yaml").read_text(encoding="utf-8")
    repo = _repo(tmp_path / "repo", STAGE, {"params.yaml": params + "extra: [x]\n", "write.py": ""})
    _commit(repo)
    (repo / "params.yaml").write_text(params + "extra: {0: x}\n", encoding="utf-8")
    _commit(repo)
    done = subprocess.run(
        [sys.executable, "-m", "pipeline.tools.cli", "compare", "HEAD~1", "HEAD"],
        cwd=repo,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    assert "params that differ:\n  extra[0]: 'x' → (absent)\n  extra{0}: (absent) → 'x'\n" in done.stdout


def test_the_pointer_never_names_a_folder_diff_would_read_instead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A branch named `data` (a folder of the project too): `judgeloop diff data HEAD` read the
    folder ./data as a run's folder, not the branch compare compared (now it refuses the two)."""
    (tmp_path / "data").mkdir()
    monkeypatch.chdir(tmp_path)
    line = _pointer(["data", "HEAD"], ["paper"])[1]
    assert not line.startswith("  judgeloop diff data"), line
    assert "git rev-parse data" in line


def test_a_params_file_dvc_cannot_read_is_said_not_absent() -> None:
    """In real DVC a corrupt second params file (other.yaml: `k: [1`) was listed as
    `other.yaml: k: 1 → (absent)`: its keys as gone, with no word of why."""
    runs: list[dict[str, dict[str, Any]]] = [
        {"other.yaml": {"k": 1}},
        {"other.yaml": Unreadable("DVC cannot read it: YAML file structure is corrupted")},
    ]
    assert params_changes(runs, ["HEAD~1", "HEAD"]) == [
        "  other.yaml in HEAD: DVC cannot read it: YAML file structure is corrupted"
    ]


def test_a_number_that_became_nan_points_to_diff() -> None:
    """A mean that became NaN (the judge scored none) is a change whose cause diff shows, judgement
    by judgement; the pointer was left out (only a change with a number counted)."""
    from tests.test_compare_numbers import _with

    out = render(["A", "B"], [_with(after=4.5), _with(after=math.nan)], [{}, {}], ["paper"], show_all=False)
    assert "judgeloop diff A B --design paper" in out, out
