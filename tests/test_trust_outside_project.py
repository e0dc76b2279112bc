"""Files outside the project (pipeline.llm.project_files): a config file read by its fixed name
(params.yaml, dvc.yaml, dvc.lock, a preset) that is a link out of the project is refused, naming the
file and the fix; a link inside the project is read. A data file outside the project (allowed on
purpose) is read, but an error about it names the file and the line without quoting what is in it:
a params.yaml linked to a credentials file printed a line of it in every command's YAML error
(redteam4), and `data.labels: /root/.git-credentials` would have listed that file's first line as
the labels' header columns."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import click
import pytest

from pipeline.data.jsonl import Result, read_jsonl
from pipeline.data.labels import load_labels
from pipeline.data.listening_requests import load_requests
from pipeline.data.transcript_files import read_file
from pipeline.errors import ConfigError, CorruptRecordError, InputError, LockMismatchError
from pipeline.llm.project_files import NOT_QUOTED
from pipeline.llm.recordings.owners import load_yaml
from pipeline.llm.settings import EngineSettings, load_settings, read_params_file
from pipeline.llm.types import ModelIdentity
from pipeline.tools.batch.manifest import MANIFEST_FILE, Manifest
from pipeline.tools.check import read_lock, run_check
from pipeline.tools.dvc_run import preset_args
from pipeline.tools.preflight import llm_stages
from tests.test_batch import exported  # noqa: F401  (the fixture: an export of two calls)

SECRET = "aws_access_key_id = AKIAIOSFODNN7EXAMPLE"
CREDENTIALS = f"[default]\n{SECRET}\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The project (the folder judgeloop runs in), beside a folder of someone else's files."""
    (tmp_path / "project").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "project")
    return tmp_path / "project"


def _credentials(project: Path, name: str = "credentials") -> Path:
    path = project.parent / "elsewhere" / name
    path.write_text(CREDENTIALS, encoding="utf-8")
    return path


def _refused(error: BaseException, name: str) -> None:
    message = str(getattr(error, "message", error))
    assert f"{name}: a link to" in message and "outside the project" in message, message
    assert "replace the link with the file" in message or "a folder of the project's own" in message, message
    assert "AKIA" not in message, message


def test_a_params_file_linked_out_of_the_project_is_refused_unread(project: Path) -> None:
    (project / "params.yaml").symlink_to(_credentials(project))
    with pytest.raises(ConfigError) as raised:
        read_params_file(Path("params.yaml"), environ={})
    _refused(raised.value, "params.yaml")


def test_a_params_file_linked_inside_the_project_is_read(project: Path) -> None:
    (project / "conf").mkdir()
    (project / "conf" / "params.yaml").write_text("llm:\n  model: m\n", encoding="utf-8")
    (project / "params.yaml").symlink_to("conf/params.yaml")
    assert read_params_file(Path("params.yaml"), environ={}) == {"llm": {"model": "m"}}


def test_a_params_file_in_a_folder_linked_out_of_the_project_is_refused(project: Path) -> None:
    _credentials(project, "params.yaml")
    (project / "conf").symlink_to(project.parent / "elsewhere")
    with pytest.raises(ConfigError) as raised:
        read_params_file(Path("conf/params.yaml"), environ={})
    _refused(raised.value, "conf/params.yaml")


@pytest.mark.parametrize("name", ["dvc.yaml", "dvc.lock"])
def test_dvc_files_linked_out_of_the_project_are_refused_unread(project: Path, name: str) -> None:
    (project / name).symlink_to(_credentials(project))
    with pytest.raises(LockMismatchError) as raised:
        load_yaml(Path(name), "the recordings' owners")
    _refused(raised.value, name)


def test_preflight_refuses_a_dvc_yaml_linked_out_of_the_project(project: Path) -> None:
    (project / "dvc.yaml").symlink_to(_credentials(project))
    with pytest.raises(ConfigError) as raised:
        llm_stages(Path("."))
    _refused(raised.value, "dvc.yaml")


def test_a_preset_linked_out_of_the_project_is_refused_unread(project: Path) -> None:
    (project / "presets").mkdir()
    (project / "presets" / "p.yaml").symlink_to(_credentials(project))
    with pytest.raises(click.BadParameter) as raised:
        preset_args(Path("presets/p.yaml"))
    _refused(raised.value, "presets/p.yaml")


def test_a_yaml_error_quotes_its_line_only_inside_the_project(project: Path) -> None:
    """A params file named by JUDGELOOP_PARAMS elsewhere is read, but its lines are not quoted."""
    outside = _credentials(project, "params.yaml")
    outside.write_text(f"llm: 1\n{SECRET}: a: b\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"params\.yaml:\d+: not valid YAML") as raised:
        read_params_file(outside, environ={})
    assert "AKIA" not in raised.value.message
    inside = project / "params.yaml"
    inside.write_text(outside.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(ConfigError, match="AKIA"):  # as before: the line, with a caret under the place
        read_params_file(Path("params.yaml"), environ={})


def test_labels_outside_the_project_are_not_quoted_as_their_header(project: Path) -> None:
    with pytest.raises(InputError) as raised:
        load_labels(_credentials(project))
    assert raised.value.line == 1 and "credentials:1: the header has columns" in raised.value.message
    assert NOT_QUOTED in raised.value.message and "default" not in raised.value.problem


def test_a_transcript_outside_the_project_is_not_quoted_as_its_header(project: Path) -> None:
    path = _credentials(project, "300_TRANSCRIPT.csv")
    path.write_text(f"{SECRET}\tspeakr\n1\t2\n", encoding="utf-8")
    with pytest.raises(InputError) as raised:
        read_file(path, str(path), path.read_bytes())
    assert (
        raised.value.line == 1 and "AKIA" not in raised.value.message and NOT_QUOTED in raised.value.problem
    )


class _Scored(Result):
    item: str
    score: int


def test_a_record_outside_the_project_is_refused_without_its_values(project: Path) -> None:
    path = project.parent / "elsewhere" / "scores.jsonl"
    path.write_text('{"item": "a", "score": "AKIAIOSFODNN7EXAMPLE"}\n', encoding="utf-8")
    with pytest.raises(InputError) as raised:
        read_jsonl(path, _Scored)
    assert raised.value.line == 1 and "score: " in raised.value.problem and "AKIA" not in raised.value.message
    path.write_text(f"{SECRET}\n", encoding="utf-8")  # not JSON: pydantic's error quotes the line
    with pytest.raises(InputError) as raised:
        read_jsonl(path, _Scored)
    assert "AKIA" not in raised.value.message
    inside = project / "scores.jsonl"
    inside.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(InputError, match="AKIA"):  # inside the project, quoted as before
        read_jsonl(inside, _Scored)


def test_a_transcript_cell_outside_the_project_is_not_quoted(project: Path) -> None:
    path = _credentials(project, "301_TRANSCRIPT.csv")
    path.write_text(f"start_time\tstop_time\tspeaker\tvalue\n{SECRET}\t1\tEllie\thello\n", encoding="utf-8")
    with pytest.raises(InputError) as raised:
        read_file(path, str(path), path.read_bytes())
    assert (
        raised.value.line == 2 and "start_time" in raised.value.problem and "AKIA" not in raised.value.message
    )
    inside = project / "301_TRANSCRIPT.csv"
    inside.write_bytes(path.read_bytes())
    with pytest.raises(InputError, match="AKIA"):  # inside the project, quoted as before
        read_file(inside, inside.name, inside.read_bytes())


def test_check_refuses_a_lock_linked_out_of_the_project(project: Path) -> None:
    (project / "dvc.lock").symlink_to(_credentials(project))
    with pytest.raises(click.ClickException) as raised:
        read_lock(Path("."))
    _refused(raised.value, "dvc.lock")


def test_a_batch_manifest_outside_the_project_is_refused_without_its_values(
    exported: Path,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    batch = tmp_path_factory.mktemp("elsewhere") / "batch"
    shutil.move(exported, batch)
    path = batch / MANIFEST_FILE
    first, second = path.read_text(encoding="utf-8").splitlines()
    identity = ModelIdentity.model_validate(json.loads(first)["model"])
    entry = json.loads(second)
    entry["request"]["messages"] = SECRET  # not a list: pydantic's error quotes the value
    path.write_text(f"{first}\n{json.dumps(entry)}\n", encoding="utf-8")
    with pytest.raises(CorruptRecordError, match=rf"{MANIFEST_FILE}:2: not a line batch export") as raised:
        Manifest(batch, identity)
    assert "messages" in raised.value.message and "AKIA" not in raised.value.message


def test_a_value_refused_in_a_params_file_outside_the_project_is_not_quoted(project: Path) -> None:
    """JUDGELOOP_PARAMS may name a params file elsewhere (it is read), but not to print its values."""
    outside = _credentials(project, "params.yaml")
    outside.write_text("llm:\n  parallelism: AKIAIOSFODNN7EXAMPLE\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"params\.yaml:2: llm\.parallelism: ") as raised:
        load_settings(EngineSettings, outside, environ={})
    assert "AKIA" not in raised.value.message
    (project / "params.yaml").write_bytes(outside.read_bytes())
    with pytest.raises(ConfigError, match=r"\(got 'AKIA"):  # inside the project, quoted as before
        load_settings(EngineSettings, Path("params.yaml"), environ={})


@pytest.mark.parametrize("value", ["*AKIAIOSFODNN7EXAMPLE", "!AKIAIOSFODNN7EXAMPLE x"])
def test_a_yaml_error_outside_the_project_quotes_no_alias_or_tag_of_it(project: Path, value: str) -> None:
    """PyYAML's problem itself quotes the file where an alias or a tag is wrong ("found
    undefined alias 'AKIA...'"): outside the project that name is not quoted either; the problem,
    line and column are given, and a character that cannot start a token is still named (review6)."""
    outside = project.parent / "elsewhere" / "params.yaml"
    outside.write_text(f"llm:\n  model: {value}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"params\.yaml:2: not valid YAML \(.*line 2") as raised:
        read_params_file(outside, environ={})
    assert "AKIA" not in raised.value.message, raised.value.message
    requests = project.parent / "elsewhere" / "requests.yaml"
    requests.write_text(f"requests:\n  - id: {value}\n", encoding="utf-8")
    with pytest.raises(InputError) as refused:
        load_requests(requests)
    assert refused.value.line == 2 and "AKIA" not in refused.value.message, refused.value.message
    (project / "params.yaml").write_bytes(outside.read_bytes())
    with pytest.raises(ConfigError, match="AKIA"):  # inside the project, quoted as before
        read_params_file(Path("params.yaml"), environ={})


def test_a_tab_outside_the_project_is_still_named_as_the_character_yaml_refuses(project: Path) -> None:
    outside = project.parent / "elsewhere" / "params.yaml"
    outside.write_text("llm:\n\tmodel: m\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"found character '\\t' that cannot start any token"):
        read_params_file(outside, environ={})


def test_check_refuses_a_params_file_linked_out_of_the_project(project: Path) -> None:
    """`judgeloop check` resolved params.yaml's link before reading it, so the file outside was read
    as a params file of its own folder and copied into the check's copy of the project, where every
    error quotes it as a file inside (review6)."""
    elsewhere = project.parent / "elsewhere" / "hosts.yml"
    elsewhere.write_text("cache:\n  recordings: recordings\n", encoding="utf-8")  # valid: read whole
    (project / "params.yaml").symlink_to(elsewhere)
    (project / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        run_check(())
    _refused(raised.value, "params.yaml")
