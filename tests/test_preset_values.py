"""A preset's values reach params.yaml as the preset gives them (`exp --preset`): preset_args writes
each as DVC's `-S key=value`, which DVC reads with Hydra's override grammar (dvc.utils.hydra.apply_
overrides) and OmegaConf resolves. str() of a value is no Hydra spelling: a list's "\\n" became the
two characters backslash and n (a stop string never met), a `${oc.env:NAME}` wrote the environment
variable's value into params.yaml (and so dvc.lock and the experiment's commit), and a text holding a
comma became a sweep."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import click
import pytest
import yaml
from dvc.utils.hydra import apply_overrides, to_hydra_overrides
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pipeline.tools.dvc_run import preset_args
from pipeline.tools.hydra_spelling import overrides
from pipeline.tools.preset_values import first_difference
from tests.test_experiments import _commit, _repo, _run

PRESETS = [
    ('llm.options.stop: ["\\n\\nQuestion:", "###"]\n', ["llm", "options", "stop"], ["\n\nQuestion:", "###"]),
    ("llm.model: ${oc.env:JUDGELOOP_TEST_SECRET}\n", ["llm", "model"], "${oc.env:JUDGELOOP_TEST_SECRET}"),
    ('data.interviewer: "no"\n', ["data", "interviewer"], "no"),
    ("data.interviewer: 'Ellie, MD'\n", ["data", "interviewer"], "Ellie, MD"),
]


@pytest.mark.parametrize(("preset", "where", "value"), PRESETS)
def test_a_preset_s_value_reaches_params_yaml_as_given_or_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, preset: str, where: list[str], value: object
) -> None:
    monkeypatch.setenv("JUDGELOOP_TEST_SECRET", "hunter2")
    (tmp_path / "preset.yaml").write_text(preset, encoding="utf-8")
    params = tmp_path / "params.yaml"
    params.write_text(
        "llm:\n  model: m\n  options:\n    stop: []\ndata:\n  interviewer: Ellie\n", encoding="utf-8"
    )
    try:
        args = preset_args(tmp_path / "preset.yaml")
    except Exception:  # refused, naming the preset: nothing reaches params.yaml
        return
    overrides = args[1::2]
    apply_overrides(str(params), overrides)  # what `dvc exp run -S` does with each
    got = yaml.safe_load(params.read_text(encoding="utf-8"))  # as a stage reads it
    for key in where:
        got = got[key]
    assert got == value
    assert "hunter2" not in params.read_text(encoding="utf-8")


# Every kind of value a preset may give (text of any character; numbers with nan, inf and -0.0; true,
# false, null; lists and mappings of them), as PyYAML makes them from a preset file
SCALARS = (
    st.text(st.characters() | st.sampled_from(list("\\'\"${}[](),=:~+@% \n\t")))
    | st.sampled_from(
        [
            "\n\nQuestion:",
            "${oc.env:JUDGELOOP_TEST_SECRET}",
            "\\${x}",
            "a,b",
            "[1]",
            "k=v",
            "~x",
            "+y",
            "'",
            '"',
            "\\",
        ]
    )
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.booleans()
    | st.none()
)
KEYS = st.from_regex(r"[A-Za-z_][A-Za-z0-9_-]{0,8}", fullmatch=True).filter(
    lambda key: key.lower() not in {"null", "true", "false", "nan", "inf"}
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(value=VALUES)
def test_every_value_is_spelled_so_that_dvc_s_hydra_makes_it_again(value: object) -> None:
    """The spelling alone, through what DVC's apply_overrides does between parsing the -S and writing
    the file: Hydra's parser, Hydra's override applied to an OmegaConf config in struct mode, to_object
    (which resolves interpolations)."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from omegaconf import OmegaConf

    config = OmegaConf.create({"section": {"key": "old", "other": 1}}, flags={"allow_objects": True})
    OmegaConf.set_struct(config, True)
    ConfigLoaderImpl._apply_overrides_to_config(to_hydra_overrides(overrides("section.key", value)), config)
    got = OmegaConf.to_object(config)
    assert first_difference({"section": {"key": value, "other": 1}}, got) is None


@settings(max_examples=60, deadline=None)
@given(value=VALUES)
def test_a_preset_value_reaches_params_yaml_exactly_or_is_refused_by_name(
    tmp_path_factory: pytest.TempPathFactory, value: object
) -> None:
    """Through preset_args and DVC's own apply_overrides, read back as a stage reads params.yaml."""
    folder = tmp_path_factory.mktemp("preset")
    preset = folder / "preset.yaml"
    written = yaml.safe_dump({"section.key": value}, allow_unicode=True)
    assume(first_difference({"section.key": value}, yaml.safe_load(written)) is None)
    preset.write_text(written, encoding="utf-8")
    params = folder / "params.yaml"
    params.write_text("section:\n  key: old\n  other: 1\n", encoding="utf-8")
    try:
        args = preset_args(preset, params)
    except click.BadParameter as refused:
        assert f"{preset}: section.key: " in refused.format_message()
        assert "Fix: " in refused.format_message()
        return
    apply_overrides(str(params), args[1::2])
    got = yaml.safe_load(params.read_text(encoding="utf-8"))
    assert first_difference({"section": {"key": value, "other": 1}}, got) is None


CARRIED = [
    "\n\nQuestion:",
    'it\'s "quoted"',
    "back\\slash\\",
    "\\'",
    "$HOME and ${oc.env:JUDGELOOP_TEST_SECRET} and \\${x} and \\\\${y}",
    "a, b, c",
    "[not, a, list]",
    "{not: a mapping}",
    "k=v",
    "~tilde",
    "+plus",
    "++plus",
    "ünïcødé ✓ \u2028 \x85 \t",
    "  spaces around  ",
    "",
    "null",
    "true",
    "1.5",
    12345678901234567890,
    -7,
    0.1,
    float("nan"),
    float("inf"),
    float("-inf"),
    -0.0,
    True,
    False,
    None,
    [],
    ["\n", 1, [None, {"a": "b,c"}]],
    {},
    {"num_ctx": 16384, "stop": ["###"], "deep": {"x": "${y}"}},
]


@pytest.mark.parametrize("value", CARRIED, ids=repr)
def test_each_kind_of_value_in_a_preset_is_carried_not_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: object
) -> None:
    monkeypatch.setenv("JUDGELOOP_TEST_SECRET", "hunter2")
    preset, params = tmp_path / "preset.yaml", tmp_path / "params.yaml"
    preset.write_text(yaml.safe_dump({"section.key": value}), encoding="utf-8")
    params.write_text("section:\n  key:\n    old: 1\n  other: 1\n", encoding="utf-8")
    apply_overrides(str(params), preset_args(preset, params)[1::2])
    text = params.read_text(encoding="utf-8")
    assert first_difference({"section": {"key": value, "other": 1}}, yaml.safe_load(text)) is None
    assert "hunter2" not in text


REFUSED = [
    (
        'section.key: "no"\n',
        "section.key: 'no' would not reach params.yaml as given: a stage would read False",
    ),
    ("section.key: 0.00001\n", "a stage would read '1e-05'"),
    ("section.key: 2026-01-01\n", "is a date"),
    ("section.key: 010\n", ":1: 010 is 8 to judgeloop (YAML 1.1) but 10 to DVC (YAML 1.2)"),
    ("section.key: {null: 1}\n", "the mapping's key None has no spelling"),
    ("section key: 1\n", "the key 'section key' is no params.yaml key"),
    ("section.key: 1\nsection.key: 2\n", ":2: 'section.key' is given twice"),
]


@pytest.mark.parametrize(("preset_text", "said"), REFUSED)
def test_a_value_that_cannot_be_carried_is_refused_naming_the_preset_and_the_key(
    tmp_path: Path, preset_text: str, said: str
) -> None:
    preset, params = tmp_path / "preset.yaml", tmp_path / "params.yaml"
    preset.write_text(preset_text, encoding="utf-8")
    params.write_text("section:\n  key: old\n", encoding="utf-8")
    with pytest.raises(click.BadParameter) as refused:
        preset_args(preset, params)
    assert said in refused.value.format_message()
    assert str(preset) in refused.value.format_message()


def test_a_change_dvc_s_rewrite_would_make_elsewhere_in_params_yaml_is_refused(tmp_path: Path) -> None:
    """DVC resolves every interpolation in the file it rewrites: the preset is refused, naming it."""
    preset, params = tmp_path / "preset.yaml", tmp_path / "params.yaml"
    preset.write_text("section.key: 2\n", encoding="utf-8")
    params.write_text("section:\n  key: 1\n  path: ${section.key}/x\n", encoding="utf-8")
    with pytest.raises(click.BadParameter) as refused:
        preset_args(preset, params)
    assert "what its section.path '${section.key}/x' resolves to" in refused.value.format_message()


def _experiment(root: Path, values: list[object], *options: str) -> tuple[dict[str, object], bool]:
    """`judgeloop exp --preset` (a preset giving section.k0..kN these values) in a new DVC project in
    a git repo: params.yaml of the experiment's commit as a stage reads it, and whether any file of
    that commit holds the test's secret."""
    names = [f"k{index}" for index in range(len(values))]
    params = "section:\n" + "".join(f"  {name}: old\n" for name in names)
    repo = _repo(
        root, "stages:\n  noop:\n    cmd: 'true'\n    params:\n      - section\n", {"params.yaml": params}
    )
    _commit(repo)
    preset = yaml.safe_dump({f"section.{name}": value for name, value in zip(names, values, strict=True)})
    (root / "preset.yaml").write_text(preset, encoding="utf-8")
    _run([sys.executable, "-m", "pipeline.tools.cli", "exp", "--preset", "preset.yaml", *options], repo)
    refs = _run(["git", "for-each-ref", "--format=%(objectname) %(refname)", "refs/exps"], repo).stdout
    [commit] = [
        line.split()[0] for line in refs.splitlines() if not line.split()[1].startswith("refs/exps/exec/")
    ]
    if "--queue" in options:  # the queued entry (DVC's stash) holds the values; the workspace is as it was
        assert (repo / "params.yaml").read_text(encoding="utf-8") == params
    text = _run(["git", "show", f"{commit}:params.yaml"], repo).stdout
    got = yaml.safe_load(text)["section"]
    secret = _run(["git", "grep", "-I", "-e", "hunter2", commit], repo, check=False)  # in any file committed
    return {name: got[name] for name in names}, secret.returncode != 1


@pytest.mark.slow
@pytest.mark.parametrize("options", [(), ("--temp",), ("--queue",)], ids=["workspace", "temp", "queue"])
def test_judgeloop_exp_with_dvc_puts_every_kind_of_value_into_the_experiment_s_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: tuple[str, ...]
) -> None:
    """Real DVC in a git repo: `dvc exp run` (in the workspace, in a temporary folder, or queued: its
    entry) commits params.yaml with each value exactly as the preset gives it, and no environment
    variable's value in any file."""
    monkeypatch.setenv("JUDGELOOP_TEST_SECRET", "hunter2")
    got, secret_committed = _experiment(tmp_path / "repo", CARRIED, *options)
    assert first_difference({f"k{index}": value for index, value in enumerate(CARRIED)}, got) is None
    assert not secret_committed


@pytest.mark.slow
@settings(max_examples=3, deadline=None)
@given(values=st.lists(VALUES, min_size=1, max_size=6))
def test_judgeloop_exp_with_dvc_carries_drawn_values_or_refuses_them(values: list[object]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        try:
            got, _ = _experiment(Path(folder) / "repo", values)
        except AssertionError as failed:  # refused before DVC ran: the preset named, with its fix
            assert "preset.yaml: section.k" in str(failed) and "Fix: " in str(failed)
            return
    assert first_difference({f"k{index}": value for index, value in enumerate(values)}, got) is None


@pytest.mark.parametrize("value", [{"a": 5}, [5], {}], ids=repr)
def test_a_mapping_or_list_replaces_what_is_there_in_each_run_of_a_queued_sweep(
    tmp_path: Path, value: object
) -> None:
    """`judgeloop exp --preset P -S section.n=1,2 --queue`: DVC splits the overrides into one run per
    value of the sweep (get_hydra_sweeps), keeping one override per key as Hydra's sweeper writes it;
    the preset's mapping must still replace the one in params.yaml (not be merged into it) in each."""
    from dvc.utils.hydra import get_hydra_sweeps

    preset, params = tmp_path / "preset.yaml", tmp_path / "params.yaml"
    preset.write_text(yaml.safe_dump({"section.key": value}), encoding="utf-8")
    text = "section:\n  key:\n    a: 1\n    b: 2\n  n: 0\n"
    params.write_text(text, encoding="utf-8")
    runs = get_hydra_sweeps({"params.yaml": [*preset_args(preset, params)[1::2], "section.n=1,2"]})
    assert len(runs) == 2
    for number, run in enumerate(runs, start=1):
        params.write_text(text, encoding="utf-8")
        apply_overrides(str(params), run["params.yaml"])
        got = yaml.safe_load(params.read_text(encoding="utf-8"))
        assert first_difference({"section": {"key": value, "n": number}}, got) is None


def test_an_environment_variable_params_yaml_names_is_not_said_when_its_rewrite_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DVC's rewrite would put the variable's value into params.yaml: the refusal says so without
    printing the value (a CI log keeps it), and does not tell the user to write it in."""
    monkeypatch.setenv("JUDGELOOP_TEST_SECRET", "hunter2")
    preset, params = tmp_path / "preset.yaml", tmp_path / "params.yaml"
    preset.write_text("section.key: 2\n", encoding="utf-8")
    params.write_text("section:\n  key: 1\n  token: ${oc.env:JUDGELOOP_TEST_SECRET}\n", encoding="utf-8")
    with pytest.raises(click.BadParameter) as refused:
        preset_args(preset, params)
    said = refused.value.format_message()
    assert "hunter2" not in said
    assert "section.token" in said and "${oc.env:JUDGELOOP_TEST_SECRET}" in said and "Fix: " in said
