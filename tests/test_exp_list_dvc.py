"""`judgeloop exp list` in a real git + DVC project, with experiments DVC ran (exp-list-mend): each
run's numbers read from the metrics file its own params name (not the workspace's); every line
escaped, then cut to 100 columns of a terminal; the same key in two params files kept apart."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from pipeline.tools.columns import columns
from tests.conftest import ROOT
from tests.test_experiments import _commit, _repo, _run

PARAMS = (ROOT / "params.yaml").read_text(encoding="utf-8")
GOOD = json.loads((ROOT / "outputs/paper/metrics.json").read_text(encoding="utf-8"))
# The paper's metrics where its params put them, its accuracy after the loop the threshold + 0.5.
WRITE = f"""\
import json, pathlib, yaml
params = yaml.safe_load(open("params.yaml", encoding="utf-8"))
metrics = json.loads({json.dumps(json.dumps(GOOD))})
metrics["figure2"]["accuracy"]["after"]["mean"] = params["refine"]["threshold"] + 0.5
path = pathlib.Path(params["aggregate"]["metrics_out"])
path.parent.mkdir(parents=True, exist_ok=True)
path.write_text(json.dumps(metrics))
"""
STAGE = """\
stages:
  aggregate:
    cmd: python write.py
    deps: [write.py]
    params:
      - aggregate.metrics_out
      - refine.threshold
      - rag.seed
      - llm.model
      - other.yaml:
          - rag.seed
    metrics:
      - ${aggregate.metrics_out}:
          cache: false
"""
WIDE = "連貫性" * 7 + "\x1b" * 10  # 42 columns, then ten ESC shown as \x1b (40 columns)


@pytest.fixture(scope="module")
def listed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """`judgeloop exp list`'s lines of each experiment, by its name (its first line, then those of
    its numbers), after three experiments of one baseline (each run in a temporary copy, so that
    the workspace stays the baseline's)."""
    files = {"params.yaml": PARAMS, "write.py": WRITE, "other.yaml": "rag:\n  seed: 0\n"}
    repo = _repo(tmp_path_factory.mktemp("exp-list") / "repo", STAGE, files)
    _run([sys.executable, "-m", "dvc", "repro", "-q"], repo)
    _commit(repo)
    experiments = {
        "moved": ["aggregate.metrics_out=outputs/paper/moved.json", "refine.threshold=4"],
        "clash": ["rag.seed=5", "other.yaml:rag.seed=7"],
        "wide": [f"llm.model='{WIDE}'"],
    }
    for name, settings in experiments.items():
        overrides = [part for setting in settings for part in ("-S", setting)]
        _run([sys.executable, "-m", "dvc", "exp", "run", "--temp", "-n", name, *overrides], repo)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    shown = subprocess.run(
        [sys.executable, "-m", "pipeline.tools.cli", "exp", "list"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr
    by_name: dict[str, list[str]] = {}
    for line in shown.stdout.splitlines()[1:]:
        if not line.startswith(" "):
            by_name[line.split()[0]] = []
        list(by_name.values())[-1].append(line)
    assert set(by_name) == set(experiments), shown.stdout
    return by_name


@pytest.mark.slow
def test_each_run_s_numbers_are_where_its_own_params_put_them(listed: dict[str, list[str]]) -> None:
    """The experiment moved its metrics file (aggregate.metrics_out): its numbers were looked for
    where the workspace's params.yaml puts them, and every headline number read `3.5 → —`."""
    lines = listed["moved"]
    assert "aggregate.metrics_out=outputs/paper/moved.json" in lines[0], lines
    assert any(line.strip() == "paper: accuracy after (mean 1-5) 3.5 → 4.5" for line in lines), lines
    assert not any("→ —" in line for line in lines), lines


@pytest.mark.slow
def test_the_same_key_in_two_params_files_is_two_changes(listed: dict[str, list[str]]) -> None:
    """rag.seed in params.yaml and in other.yaml, both changed: one key space kept one of them."""
    first = listed["clash"][0]
    assert first.endswith("rag.seed=5, other.yaml:rag.seed=7"), first


@pytest.mark.slow
def test_a_line_is_escaped_then_cut_to_100_columns(listed: dict[str, list[str]]) -> None:
    """A value of wide letters and control characters: cut by characters (a wide letter two
    columns), then escaped (an ESC four), the line overflowed the table."""
    first = listed["wide"][0]
    assert "llm.model=連貫性連貫性" in first and "\\x1b" in first and "\x1b" not in first, repr(first)
    assert columns(first) == 100 and first.endswith("…"), repr(first)
    assert all(columns(line) <= 100 for lines in listed.values() for line in lines), listed


def test_each_params_file_s_keys_are_apart_and_an_unreadable_file_is_said() -> None:
    from pipeline.tools.compare_runs import Unreadable
    from pipeline.tools.exp_list import changed_params

    old = {"params.yaml": {"seed": 1}, "b.yaml": {"seed": 1}, "c.yaml": {"k": 1}}
    new = {"params.yaml": {"seed": 2}, "b.yaml": {"seed": 3}, "c.yaml": Unreadable("it holds no mapping")}
    assert changed_params(old, new) == ["seed=2", "b.yaml:seed=3", "c.yaml:(unreadable: it holds no mapping)"]
    assert changed_params({"params.yaml": {"seed": 1}}, {"params.yaml": {"seed": 1}, "b.yaml": {"k": 2}}) == [
        "b.yaml:k=2"
    ]


def test_a_right_to_left_name_is_isolated_so_the_two_numbers_keep_their_order() -> None:
    """An Arabic metric (or experiment) name followed by numbers forms one right-to-left run under
    the bidi algorithm (UAX #9, W2 and N1): a bidi terminal drew `الدقة 1 → 2` as `2 → 1 الدقة`,
    the baseline's number and the experiment's swapped. Each such name is isolated (FSI…PDI), as
    compare's are; an isolate the name itself holds is still shown as its escape."""
    from pipeline.tools.exp_list import _lines, moved_numbers

    metrics = json.loads((ROOT / "outputs" / "paper" / "metrics.json").read_text(encoding="utf-8"))
    metrics["figure2"] = {"الدقة": {"after": {"mean": 1.0}}, "a\u2068b": {"after": {"mean": 1.0}}}
    other = json.loads(json.dumps(metrics))
    for name in other["figure2"]:
        other["figure2"][name]["after"]["mean"] = 2.0
    runs = [{"outputs/paper/metrics.json": metrics}, {"outputs/paper/metrics.json": other}]
    moved = moved_numbers(runs, [{}, {}])
    assert "paper: \u2068الدقة after (mean 1-5)\u2069 1 → 2" in moved, moved
    assert "paper: a\\u2068b after (mean 1-5) 1 → 2" in moved, moved  # the name's own: escaped
    lines = _lines("تجربة", "abc1234", "1234567", ["judge.samples=3"], moved)
    assert lines[0].startswith("\u2068تجربة\u2069 ") and " abc1234  1234567  judge.samples=3" in lines[0]
    assert any(line.endswith("paper: \u2068الدقة after (mean 1-5)\u2069 1 → 2") for line in lines), lines
    assert not any("\u2068b" in line for line in lines), lines
    plain = _lines("exp-1", "abc1234", "1234567", ["x=1"], ["paper: coherence after (mean 1-5) 1 → 2"])
    assert not any("\u2068" in line for line in plain), plain
