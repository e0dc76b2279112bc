"""A user's own `judgeloop exp -S key=value` reaches params.yaml as DVC's grammar reads what was typed
(Hydra's override grammar), or is refused before anything runs, naming the -S and the fix
(pipeline.tools.set_values). Before, `-S 'k=${oc.env:NAME}'` wrote the environment variable's value
into params.yaml and the experiment's commit, `-S k=no` reached the stages as false, `-S f=1e-5` as
the text '1e-05', and any -S resolved a `${...}` params.yaml itself held."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import click
import pytest
import yaml
from dvc.utils.hydra import apply_overrides, to_hydra_overrides
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.tools.hydra_spelling import quoted
from pipeline.tools.preset_values import first_difference
from pipeline.tools.set_values import check_set_values
from tests.test_experiments import _commit, _repo, _run

SECRET = "hunter2"
PARAMS = "section:\n  k: old\n  n: 1\n  f: 0.5\n  l:\n  - a\n  m:\n    a: 1\n    b: 2\n"

# What a user types, and what a stage must then read at section.<key> (Hydra's grammar as DVC
# documents it: unquoted numbers, true/false/null, lists and mappings; quoted text; \' in quotes)
CARRIED = [
    ("section.k=new", "k", "new"),
    ("section.k=gemma3:27b", "k", "gemma3:27b"),
    ("section.k='a, b'", "k", "a, b"),
    ("section.k=a b", "k", "a b"),
    ("section.k='it\\'s'", "k", "it's"),
    ('section.k="say \\"hi\\""', "k", 'say "hi"'),
    ("section.k='\\${x}'", "k", "${x}"),
    ("section.k='$HOME'", "k", "$HOME"),
    ("section.k='\u2028 \t\u0085'", "k", "\u2028 \t\u0085"),
    ("section.k=null", "k", None),
    ("section.k=false", "k", False),
    ("section.n=2", "n", 2),
    ("section.n=-0.0", "n", -0.0),
    ("section.n=12345678901234567890", "n", 12345678901234567890),
    ("section.f=1.5e-3", "f", 0.0015),
    ("section.l=[x,'y, z']", "l", ["x", "y, z"]),
    ("section.m={a:5}", "m", {"a": 5, "b": 2}),  # Hydra merges a mapping into the one there
    ("++section.new=7", "new", 7),
]


def _params(tmp_path: Path, text: str = PARAMS) -> Path:
    params = tmp_path / "params.yaml"
    params.write_text(text, encoding="utf-8")
    return params


def _stage_reads(params: Path, typed: list[str]) -> dict[str, object]:
    """What DVC's `exp run -S` writes, read as a stage reads it (PyYAML)."""
    apply_overrides(str(params), typed)
    section: dict[str, object] = yaml.safe_load(params.read_text(encoding="utf-8"))["section"]
    return section


@pytest.mark.parametrize(("typed", "key", "value"), CARRIED, ids=[case[0] for case in CARRIED])
def test_a_value_typed_in_dvc_s_grammar_reaches_params_yaml_exactly(
    tmp_path: Path, typed: str, key: str, value: object
) -> None:
    params = _params(tmp_path)
    check_set_values([typed], params=params)  # not refused
    assert first_difference(value, _stage_reads(params, [typed])[key]) is None


REFUSED = [
    # an environment variable's (or another key's) value, resolved where the command does not show it
    ("section.k=${oc.env:JUDGELOOP_TEST_SECRET}", ["${oc.env:JUDGELOOP_TEST_SECRET}", "Fix: give the value"]),
    ("section.k='${oc.env:JUDGELOOP_TEST_SECRET}'", ["resolves", "Fix: give the value itself"]),
    ('section.k="a${oc.env:JUDGELOOP_TEST_SECRET}"', ["resolves", "Fix: "]),
    ("section.l=[x,'${oc.env:JUDGELOOP_TEST_SECRET}']", ["section.l=", "Fix: "]),
    ("section.m={a:'${oc.env:JUDGELOOP_TEST_SECRET}'}", ["section.m=", "Fix: "]),
    ("section.k=${section.n}", ["${section.key} another key's", "Fix: "]),
    ("section.k=choice(x,'${oc.env:JUDGELOOP_TEST_SECRET}')", ["choice(", "Fix: "]),
    # text DVC writes plain, or a float it writes without a dot, that a stage reads otherwise
    ("section.k=no", ["-S section.k=no", "'no'", "False", "give -S section.k=false"]),
    ("section.k='yes'", ["'yes'", "True", "Fix: "]),
    ("section.k=1:30", ["-S section.k=1:30", "90", "Fix: "]),
    ("section.f=1e-5", ["1e-05", "written 1.0e-05", "Fix: "]),
    # what Hydra's grammar cannot read, or DVC refuses, said with the reason and the fix
    ("section.k='a", ["-S section.k='a", "Hydra's override grammar", "Fix: quote"]),
    ("section.k=a=b]", ["-S section.k=a=b]", "Fix: quote"]),
    ("section.zz=1", ["-S section.zz=1", "Could not override", "Fix: add a key", "-S ++section.zz=1"]),
    ("section.k=glob(*)", ["glob", "refuses"]),
]


@pytest.mark.parametrize(("typed", "said"), REFUSED, ids=[case[0] for case in REFUSED])
def test_a_value_that_would_not_arrive_as_typed_is_refused_naming_the_set_and_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, typed: str, said: list[str]
) -> None:
    monkeypatch.setenv("JUDGELOOP_TEST_SECRET", SECRET)
    params = _params(tmp_path)
    with pytest.raises(click.ClickException) as refused:
        check_set_values([typed], params=params)
    message = refused.value.format_message()
    for part in said:
        assert part in message
    assert SECRET not in message
    assert params.read_text(encoding="utf-8") == PARAMS  # nothing written


def test_a_value_params_yaml_itself_holds_that_any_set_would_change_is_refused_without_its_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any -S makes DVC write the whole file again, resolving a `${...}` params.yaml holds: refused
    (the variable's value never said), and with it a quote only YAML 1.1 needs, dropped."""
    monkeypatch.setenv("JUDGELOOP_TEST_SECRET", SECRET)
    for extra, typed, said in [
        ("  token: ${oc.env:JUDGELOOP_TEST_SECRET}\n", "section.n=2", "section.token '${oc.env:JUDGELOOP_"),
        ("  token: ${oc.env:JUDGELOOP_TEST_SECRET}\n", "section={n:2}", "section.token '${oc.env:JUDGELOOP_"),
        ("  word: 'no'\n", "section.n=2", "section.word would change from 'no' to False"),
    ]:
        params = _params(tmp_path, PARAMS + extra)
        with pytest.raises(click.ClickException) as refused:
            check_set_values([typed], params=params)
        message = refused.value.format_message()
        assert said in message and "Fix: " in message and SECRET not in message


@pytest.mark.parametrize(
    ("text", "typed"),
    [("section:\n  on: 1\n", "section.on=2"), ("section:\n  x:\n    yes: 1\n", "section.x.yes=2")],
)
def test_a_key_the_two_yamls_read_apart_is_refused_not_a_traceback(
    tmp_path: Path, typed: str, text: str
) -> None:
    """`on:` is the key True to a stage (YAML 1.1) and 'on' to DVC (1.2): named, with the fix."""
    with pytest.raises(click.ClickException) as refused:
        check_set_values([typed], params=_params(tmp_path, text))
    message = refused.value.format_message()
    assert message.startswith(f"-S {typed}: ") and "YAML 1.1" in message and "Fix: " in message


def test_dvc_s_relayout_of_params_yaml_is_said_with_its_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Values unchanged, the layout not: a warning naming the lines DVC writes otherwise."""
    params = _params(tmp_path, "section:\n    k: old\n    l: [a, b]   # two\n")
    check_set_values(["section.k=new"], params=params)
    warned = capsys.readouterr().err
    assert "-     l: [a, b]   # two" in warned and "+   - a" in warned
    check_set_values(["section.k=new"], params=_params(tmp_path))  # already in DVC's layout: silent
    assert capsys.readouterr().err == ""


def test_a_sweep_s_every_run_is_checked(tmp_path: Path) -> None:
    params = _params(tmp_path)
    check_set_values(["section.n=1,2,3"], params=params)
    with pytest.raises(click.ClickException) as refused:
        check_set_values(["section.k=x,no"], params=params)
    assert "False" in refused.value.format_message()


def test_the_user_s_set_is_checked_after_the_preset_s(tmp_path: Path) -> None:
    """A preset's `++` adds a key; the user's plain -S then changes it (DVC applies them in order)."""
    params = _params(tmp_path)
    check_set_values(["section.extra=2"], preset=["++section.extra=1"], params=params)
    # a preset's text `${...}` (spelled \${ by pipeline.tools.hydra_spelling) is text to the check too
    check_set_values(["section.n=2"], preset=["++section.k='\\${oc.env:HOME}'"], params=params)
    with pytest.raises(click.ClickException):
        check_set_values(["section.extra=2"], params=params)  # without the preset's ++: no such key


# Text of any character, typed bare or quoted as Hydra's grammar quotes it
TEXT = st.text(st.characters() | st.sampled_from(list("\\'\"${}[](),=:~+@% \n\t")))


@settings(max_examples=150, deadline=None)
@given(text=TEXT, quote=st.booleans())
def test_a_typed_value_not_refused_is_what_a_stage_reads(text: str, quote: bool) -> None:
    """Whatever is typed: refused, or a stage reads exactly Hydra's reading of it, the rest of
    params.yaml unchanged, and no environment variable's value anywhere in the file."""
    typed = f"section.k={quoted(text) if quote else text}"
    with tempfile.TemporaryDirectory() as folder:
        params = _params(Path(folder))
        try:
            check_set_values([typed], params=params)
        except click.ClickException as refused:
            assert "-S " in refused.format_message() and "Fix" in refused.format_message()
            return
        [override] = to_hydra_overrides([typed])
        if override.is_sweep_override():
            return  # DVC queues a sweep's runs (checked above), never runs it in the workspace
        section = _stage_reads(params, [typed])
    expected = {**yaml.safe_load(PARAMS)["section"], "k": override.value()}
    assert first_difference(expected, section) is None


# Any value a preset may give, typed as Hydra's grammar spells it (pipeline.tools.hydra_spelling: a
# user who quotes text): refused, or it reaches params.yaml as the value itself
VALUES = st.recursive(
    TEXT | st.integers() | st.floats(allow_nan=False) | st.booleans() | st.none(),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.from_regex(r"[a-z][a-z0-9_]{0,5}", fullmatch=True), inner, max_size=3)
    ),
    max_leaves=6,
)


@settings(max_examples=150, deadline=None)
@given(value=VALUES)
def test_a_value_spelled_in_hydra_s_grammar_is_carried_exactly_or_refused(value: object) -> None:
    from pipeline.tools.hydra_spelling import UnspellableValue, spelled

    try:
        typed = f"++section.new={spelled(value)}"
    except UnspellableValue:
        return
    with tempfile.TemporaryDirectory() as folder:
        params = _params(Path(folder))
        try:
            check_set_values([typed], params=params)
        except click.ClickException as refused:
            assert refused.format_message().startswith("-S ++section.new=") and "Fix: " in str(refused)
            return
        section = _stage_reads(params, [typed])
    assert first_difference(value, section["new"]) is None


def _experiment(
    root: Path, typed: list[str], *options: str, params: str = PARAMS
) -> tuple[int, str, str, list[str], bool]:
    """`judgeloop exp -S ...` in a new DVC project in a git repo: its exit status and stderr, the
    workspace's params.yaml after, params.yaml of each experiment's commit, and whether any file of
    those commits holds the test's secret."""
    dvc_yaml = "stages:\n  noop:\n    cmd: 'true'\n    params:\n      - section\n"
    repo = _repo(root, dvc_yaml, {"params.yaml": params})
    _commit(repo)
    sets = [part for one in typed for part in ("-S", one)]
    done = _run([sys.executable, "-m", "pipeline.tools.cli", "exp", *sets, *options], repo, check=False)
    refs = _run(["git", "for-each-ref", "--format=%(objectname) %(refname)", "refs/exps"], repo).stdout
    commits = [line.split()[0] for line in refs.splitlines() if "/exec/" not in line.split()[1]]
    committed = [_run(["git", "show", f"{commit}:params.yaml"], repo).stdout for commit in commits]
    secret = [_run(["git", "grep", "-I", "-e", SECRET, commit], repo, check=False) for commit in commits]
    workspace = (repo / "params.yaml").read_text(encoding="utf-8")
    return done.returncode, done.stderr, workspace, committed, any(found.returncode != 1 for found in secret)


@pytest.mark.slow
@pytest.mark.parametrize(
    "typed",
    [
        "section.k=${oc.env:JUDGELOOP_TEST_SECRET}",
        "section.k='${oc.env:JUDGELOOP_TEST_SECRET}'",
        "section.k=no",
    ],
)
def test_judgeloop_exp_with_dvc_refuses_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, typed: str
) -> None:
    """Real DVC in a git repo: refused, nothing written, no experiment, the secret nowhere."""
    monkeypatch.setenv("JUDGELOOP_TEST_SECRET", SECRET)
    status, said, workspace, committed, secret_committed = _experiment(tmp_path / "repo", [typed])
    assert status != 0 and f"-S {typed}" in said and "Fix: " in said, said
    assert workspace == PARAMS and committed == [] and not secret_committed
    assert SECRET not in said


@pytest.mark.slow
@pytest.mark.parametrize("options", [(), ("--temp",), ("--queue",)], ids=["workspace", "temp", "queue"])
def test_judgeloop_exp_with_dvc_commits_each_typed_value_as_dvc_s_grammar_reads_it(
    tmp_path: Path, options: tuple[str, ...]
) -> None:
    """Each case of CARRIED on a key of its own (c0, c1, ...), in one `judgeloop exp`."""
    carried = [case for case in CARRIED if not case[0].startswith("+")]  # a key the model lacks: refused
    first = yaml.safe_load(PARAMS)["section"]
    params = {"section": {f"c{index}": first[key] for index, (_, key, _) in enumerate(carried)}}
    typed = [t.replace(f"section.{key}=", f"section.c{index}=") for index, (t, key, _) in enumerate(carried)]
    text = yaml.safe_dump(params, sort_keys=False)
    status, said, _, [committed], _ = _experiment(tmp_path / "repo", typed, *options, params=text)
    assert status == 0, said
    section = yaml.safe_load(committed)["section"]
    for index, (_, _, value) in enumerate(carried):
        assert first_difference(value, section[f"c{index}"]) is None, carried[index]


@pytest.mark.slow
def test_judgeloop_exp_with_dvc_checks_each_queued_run_of_a_sweep(tmp_path: Path) -> None:
    status, said, workspace, committed, _ = _experiment(tmp_path / "repo", ["section.k=x,no"], "--queue")
    assert status != 0 and "False" in said and committed == [] and workspace == PARAMS


def _fix(message: str) -> list[str]:
    """The -S a refusal's fix offers (`give -S ARG` or `-S ARG` after "Fix:"), as a shell splits it."""
    import shlex

    offered = message.split("Fix: ")[1].split(" -S ", 1)[1].split(";")[0]
    return shlex.split(offered)


@pytest.mark.parametrize(
    ("typed", "offered"),
    [
        ("llm.model=7", "llm.model='7'"),
        ("llm.model=true", "llm.model='true'"),
        ("llm.options.num_ctx=4096.5", None),
        ("refine.threshold=abc", None),
    ],
)
def test_a_value_hydra_reads_as_a_kind_the_key_does_not_take_is_refused_before_dvc_runs(
    tmp_path: Path, typed: str, offered: str | None
) -> None:
    """Hydra's grammar makes `7` a number, which no stage takes as a model's name: refused now (a
    stage would refuse it once DVC had started), with the quoting that gives text, which is carried."""
    from tests.conftest import ROOT

    params = _params(tmp_path, (ROOT / "params.yaml").read_text(encoding="utf-8"))
    with pytest.raises(click.ClickException) as refused:
        check_set_values([typed], params=params)
    message = refused.value.format_message()
    assert f"-S {typed}: " in message and "a stage refuses" in message and "Fix: " in message
    if offered is not None:
        assert _fix(message) == [offered]
        check_set_values([offered], params=params)


@pytest.mark.parametrize(
    ("typed", "offered"), [("section.k=no", "section.k=false"), ("section.k=on", "section.k=true")]
)
def test_the_set_a_refusal_offers_is_carried(tmp_path: Path, typed: str, offered: str) -> None:
    params = _params(tmp_path)
    with pytest.raises(click.ClickException) as refused:
        check_set_values([typed], params=params)
    assert _fix(refused.value.format_message()) == [offered]
    check_set_values([offered], params=params)


@pytest.mark.parametrize(
    "given",
    [
        ["-S", "section.k=${oc.env:JUDGELOOP_TEST_SECRET}"],
        ["--set-param=section.k=${oc.env:JUDGELOOP_TEST_SECRET}"],
        ["--set", "section.k=${oc.env:JUDGELOOP_TEST_SECRET}"],  # argparse takes an abbreviation
        ["--se=section.k=${oc.env:JUDGELOOP_TEST_SECRET}"],
        ["-fS", "section.k=${oc.env:JUDGELOOP_TEST_SECRET}"],  # -S after a flag of DVC's (--force)
        ["-fSsection.k=${oc.env:JUDGELOOP_TEST_SECRET}"],
    ],
)
def test_judgeloop_exp_checks_every_set_dvc_s_parser_reads_before_dvc_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: list[str]
) -> None:
    """Each way DVC's own parser takes a -S is checked: an abbreviation or a -S among short flags
    reached DVC unchecked (neither judgeloop's key check nor this one saw it)."""
    from click.testing import CliRunner

    from pipeline.tools.dvc_run import exp

    monkeypatch.setenv("JUDGELOOP_TEST_SECRET", SECRET)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("JUDGELOOP_PARAMS", raising=False)
    _params(tmp_path)
    done = CliRunner().invoke(exp, given)
    assert done.exit_code == 1 and "Error: -S section.k=${oc.env:JUDGELOOP_TEST_SECRET}: " in done.output
    assert SECRET not in done.output
    assert (tmp_path / "params.yaml").read_text(encoding="utf-8") == PARAMS


def test_reading_the_sets_as_dvc_does_prints_nothing_and_leaves_dvc_s_parser_as_it_was(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """DVC's parser is built once per process and parses the run itself after: its help (-h) is not
    printed twice, and its own error (a usage and DVC's message, not a traceback) is left in place."""
    from dvc.cli import parse_args
    from dvc.cli.parser import DvcParserError

    from pipeline.tools.set_params import set_params

    assert set_params(["-h", "-S", "a=1"]) == ["a=1"]
    assert set_params(["--jobs", "many", "-S", "a=1"]) == ["a=1"]  # DVC refuses them: as written
    assert capsys.readouterr() == ("", "")
    with pytest.raises(DvcParserError):
        parse_args(["exp", "run", "--jobs", "many"])


def test_a_refusal_shows_what_was_typed_escaped_and_without_a_url_s_password(tmp_path: Path) -> None:
    """A pasted command's terminal escape cannot act on the terminal through the refusal that quotes
    it, and a server URL's password typed into a -S is masked (pipeline.errors.JudgeloopError)."""
    params = _params(tmp_path)
    for typed, hidden in [
        ("section.k=${oc.env:X}\x1b]0;owned\x07", "\x1b"),
        ("section.k=http://me:pa55word@gpu1:11434/${oc.env:X}", "pa55word"),
    ]:
        with pytest.raises(click.ClickException) as refused:
            check_set_values([typed], params=params)
        message = refused.value.format_message()
        assert hidden not in message and "Fix: " in message


# review22: what the red-team review found, each a test that failed before its mend


def test_a_secret_params_yaml_resolves_never_reaches_the_refusal_even_where_resolving_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `${oc.create:${oc.env:X}}` (or oc.decode) of params.yaml's own, whose value is no YAML, made
    OmegaConf's error quote the variable's value into the refusal: refused without resolving it."""
    monkeypatch.setenv("JUDGELOOP_TEST_SECRET", f"[{SECRET}")
    for held in [
        "${oc.create:${oc.env:JUDGELOOP_TEST_SECRET}}",
        "${oc.decode:${oc.env:JUDGELOOP_TEST_SECRET}}",
    ]:
        params = _params(tmp_path, PARAMS + f"  token: {held}\n")
        with pytest.raises(click.ClickException) as refused:
            check_set_values(["section.n=2"], params=params)
        message = refused.value.format_message()
        assert SECRET not in message and "section.token" in message and "Fix: " in message, message


@pytest.mark.parametrize(
    "spelling", ["./params.yaml", "params.yaml", "{folder}/params.yaml", "sub/../params.yaml"]
)
def test_a_set_naming_params_yaml_by_another_spelling_is_checked_as_params_yaml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelling: str
) -> None:
    """DVC's `-S FILE:key=value` writes FILE: `./params.yaml:section.k=no` is params.yaml, and a
    stage would read False; it reached DVC unchecked (only `params.yaml:` was checked)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    params = _params(tmp_path)
    typed = f"{spelling.format(folder=tmp_path)}:section.k=no"
    with pytest.raises(click.ClickException) as refused:
        check_set_values([typed], params=Path("params.yaml"))
    assert "False" in refused.value.format_message() and "Fix: " in refused.value.format_message()
    assert params.read_text(encoding="utf-8") == PARAMS
    check_set_values([typed.replace("=no", "=false")], params=Path("params.yaml"))  # carried


def test_a_set_naming_params_yaml_by_another_spelling_is_checked_for_an_unknown_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipeline.tools.set_params import check_set_params

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("JUDGELOOP_PARAMS", raising=False)
    from tests.conftest import ROOT

    _params(tmp_path, (ROOT / "params.yaml").read_text(encoding="utf-8"))
    for typed in ["./params.yaml:refine.treshold=4", "params.yaml:refine.treshold=4"]:
        with pytest.raises(click.ClickException) as refused:
            check_set_params(["-S", typed])
        assert "did you mean 'refine.threshold'" in refused.value.format_message()
    check_set_params(["-S", "other.yaml:refine.treshold=4"])  # another file: not ours to check


def test_dvc_s_relayout_warning_masks_a_url_s_password(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The lines the warning shows are params.yaml's: a base_url's credentials among them are masked,
    as in every other message (pipeline.llm.redact)."""
    params = _params(tmp_path, "section:\n    k: old\n    url: http://me:pa55word@gpu1:11434/\n")
    check_set_values(["section.k=new"], params=params)
    warned = capsys.readouterr().err
    assert "url: http://" in warned and "pa55word" not in warned


@pytest.mark.parametrize("typed", ["section.f=1e300", "section.f=5e-324", "section.f=1e-5"])
def test_a_float_dvc_writes_as_text_is_not_offered_as_text(tmp_path: Path, typed: str) -> None:
    """`-S f=1e300` is a float to Hydra that a stage would read as the text '1e+300': the fix was
    "if you meant '1e+300', give -S \"f='1e+300'\"", text nobody typing a number means."""
    with pytest.raises(click.ClickException) as refused:
        check_set_values([typed], params=_params(tmp_path))
    message = refused.value.format_message()
    assert "if you meant" not in message and ".0e" in message and "Fix: " in message, message


@pytest.mark.parametrize(
    ("typed", "offered"),
    [
        (["+section.k=x"], "section.k=x"),
        (["section.zz=1"], "++section.zz=1"),
        (["section.zz=1", "+section.zz=2"], None),  # with ++section.zz=1, DVC refuses the second
    ],
)
def test_the_fix_for_a_set_dvc_refuses_is_one_dvc_takes(
    tmp_path: Path, typed: list[str], offered: str | None
) -> None:
    """`+key` where params.yaml has the key was told to edit params.yaml by hand (Hydra says: drop
    the +); a `++` was offered without trying it beside the other -S, where DVC refuses it too."""
    params = _params(tmp_path)
    with pytest.raises(click.ClickException) as refused:
        check_set_values(typed, params=params)
    message = refused.value.format_message()
    if offered is None:
        assert "++" not in message.split("Fix: ")[1] and "by hand" in message, message
        return
    assert _fix(message) == [offered], message
    check_set_values([offered], params=params)


@pytest.mark.slow
def test_judgeloop_exp_with_dvc_refuses_a_set_naming_params_yaml_as_dot_slash(tmp_path: Path) -> None:
    """Real DVC: `-S ./params.yaml:section.k=no` writes `k: no` into params.yaml (a stage reads
    False); refused before anything runs."""
    status, said, workspace, committed, _ = _experiment(tmp_path / "repo", ["./params.yaml:section.k=no"])
    assert status != 0 and "False" in said and "Fix: " in said, said
    assert workspace == PARAMS and committed == []


@pytest.mark.parametrize(
    ("typed", "offered"), [("llm.model=on", None), ("llm.digest=", "llm.digest=null")], ids=["on", "empty"]
)
def test_the_fix_offered_for_judgeloop_s_params_is_one_its_model_takes(
    tmp_path: Path, typed: str, offered: str | None
) -> None:
    """`-S llm.model=on` (True to a stage) was offered `-S llm.model=true`, which the params model
    refuses in turn; `-S llm.digest=` (Hydra's empty text, refused) was told "give a value of that
    kind" where the empty value params.yaml means is null."""
    from tests.conftest import ROOT

    params = _params(tmp_path, (ROOT / "params.yaml").read_text(encoding="utf-8"))
    with pytest.raises(click.ClickException) as refused:
        check_set_values([typed], params=params)
    message = refused.value.format_message()
    assert f"-S {typed}: " in message and "Fix: " in message, message
    if offered is None:
        assert "give -S" not in message, message
        return
    assert _fix(message) == [offered], message
    check_set_values([offered], params=params)


def test_a_set_that_deletes_a_key_as_hydra_writes_it_is_not_refused_for_its_missing_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`-S ~llm.model` (Hydra's delete, no `=`: DVC takes it) was refused "give it as -S
    section.key=value"; a deleted key's name is still checked."""
    from pipeline.tools.set_params import check_set_params
    from tests.conftest import ROOT

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("JUDGELOOP_PARAMS", raising=False)
    _params(tmp_path, (ROOT / "params.yaml").read_text(encoding="utf-8"))
    check_set_params(["-S", "~llm.options.top_k"])
    check_set_values(["~llm.options.top_k"], params=Path("params.yaml"))
    with pytest.raises(click.ClickException) as refused:
        check_set_params(["-S", "~llm.options.topk"])
    assert "did you mean 'llm.options.top_k'" in refused.value.format_message()
    with pytest.raises(click.ClickException):
        check_set_params(["-S", "llm.model"])  # no `=` and no `~`: no value given


def test_dvc_s_relayout_of_a_crlf_params_yaml_says_what_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A params.yaml with CRLF line endings: DVC writes every line again with \\n; the warning said
    "these lines change:" and showed none."""
    params = tmp_path / "params.yaml"
    params.write_bytes(PARAMS.replace("\n", "\r\n").encode())
    check_set_values(["section.k=new"], params=params)
    warned = capsys.readouterr().err
    assert "these lines change" in warned and "line endings" in warned, warned


def test_a_sweep_s_refusal_names_the_sweep_as_typed_and_its_run(tmp_path: Path) -> None:
    """`-S section.k=choice(x,no)` was refused as "-S section.k=no: ... give -S section.k=false", a
    -S the user never typed whose fix drops the sweep's other runs."""
    with pytest.raises(click.ClickException) as refused:
        check_set_values(["section.k=choice(x,no)", "section.n=3"], params=_params(tmp_path))
    message = refused.value.format_message()
    assert message.startswith("-S section.k=choice(x,no), in its run -S section.k=no: "), message
    assert "False" in message and "Fix: " in message


@pytest.mark.parametrize("name", ["../outside/other.yaml", "{outside}/other.yaml", "link.yaml"])
def test_a_set_naming_a_file_outside_the_project_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """`-S ../x.yaml:a=2` made DVC rewrite a file outside the project, then fail to add it to git
    ("invalid data in index"), leaving the outside file changed and git's index broken."""
    project, outside = tmp_path / "project", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (outside / "other.yaml").write_text("a: 1\n", encoding="utf-8")
    (project / "link.yaml").symlink_to(outside / "other.yaml")
    (project / "mine.yaml").write_text("a: 1\n", encoding="utf-8")
    _params(project)
    monkeypatch.chdir(project)
    typed = f"{name.format(outside=outside)}:a=2"
    with pytest.raises(click.ClickException) as refused:
        check_set_values([typed])
    message = refused.value.format_message()
    assert message.startswith(f"-S {typed}: ") and "outside the project" in message and "Fix: " in message
    assert (outside / "other.yaml").read_text(encoding="utf-8") == "a: 1\n"
    check_set_values(["mine.yaml:a=2"])  # a file of the project's own: DVC's to change


@pytest.mark.parametrize("typed", ["section.m={a:'???'}", "section.k='???'", "section.l=[x,'???']"])
def test_omegaconf_s_missing_mark_typed_is_refused_as_never_carried(tmp_path: Path, typed: str) -> None:
    """`-S section.m={a:'???'}` passed the check, and DVC kept m.a as it was: '???' is OmegaConf's
    mark of a missing value, which a merge skips (Hydra's reading, that the check compared with, too)."""
    with pytest.raises(click.ClickException) as refused:
        check_set_values([typed], params=_params(tmp_path))
    message = refused.value.format_message()
    assert message.startswith(f"-S {typed}: ") and "???" in message and "Fix: " in message, message


def test_a_secret_params_yaml_resolves_never_reaches_a_preset_s_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`judgeloop exp --preset FILE` tried the preset on a copy of params.yaml first
    (pipeline.tools.preset_values), whose refusal quoted OmegaConf's error, and so the secret a
    `${oc.create:${oc.env:X}}` of params.yaml resolves to: refused before, without resolving it."""
    from click.testing import CliRunner

    from pipeline.tools.dvc_run import exp

    monkeypatch.setenv("JUDGELOOP_TEST_SECRET", f"[{SECRET}")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("JUDGELOOP_PARAMS", raising=False)
    _params(tmp_path, PARAMS + "  token: ${oc.create:${oc.env:JUDGELOOP_TEST_SECRET}}\n")
    (tmp_path / "preset.yaml").write_text("section.n: 2\n", encoding="utf-8")
    done = CliRunner().invoke(exp, ["--preset", "preset.yaml"])
    assert done.exit_code != 0 and "Error: --preset preset.yaml: " in done.output, done.output
    assert SECRET not in done.output and "section.token" in done.output and "Fix: " in done.output
