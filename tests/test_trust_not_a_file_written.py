"""The files judgeloop reads back around what it writes, where something other than a regular file
stands: `judgeloop dvc-yaml --check`'s dvc.yaml, and the batch round's manifest, results and
requests files. Each is read through one descriptor asked that it is a regular file
(pipeline.llm.files.open_regular), so that a pipe is refused, never waited on, a link to /dev/zero
is not read until the memory runs out, and a folder is named, not a traceback.

Left open by redteam4 and writers-red: dvc-yaml --check looked (exists) and then read the path
whole (read_text); the manifest's requests were read back through a second open of its path, the
results file was looked at (is_file) and then opened twice, once a pass, and the Ray runner opened
requests.jsonl through its path.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.errors import ConfigError
from pipeline.experiments.params import load_params
from pipeline.llm.files import NotARegularFile
from pipeline.llm.keys import request_key
from pipeline.llm.types import ModelIdentity
from pipeline.tools import dvc_yaml as dvc_yaml_module
from pipeline.tools.batch.exchange import _Ingest, ingest
from pipeline.tools.batch.manifest import MANIFEST_FILE, REQUESTS_FILE, Manifest
from pipeline.tools.batch.ray_sender import _lines, stretches
from pipeline.tools.batch.runners import _has_requests
from pipeline.tools.dvc_yaml import dvc_yaml
from tests.test_batch import _answers, exported  # noqa: F401  (the fixture: an export of two calls)
from tests.test_trust_not_a_file import _NOT_FILES, _memory_bound, _no_wait_for_good

GENERATED = "stages:\n  judge:\n    cmd: python -m stages paper judge\n"


@pytest.fixture
def generated(monkeypatch: pytest.MonkeyPatch) -> str:
    """dvc.yaml as the designs give it (here a fixed text: what is checked is how the file is read)."""
    monkeypatch.setattr(dvc_yaml_module, "generated", lambda root: (GENERATED, "{}\n"))
    # imports.json beside it is the code stage's (tests/test_code_digests.py), not what is read here
    monkeypatch.setattr(dvc_yaml_module, "_imports_file", lambda path, text, check: None)
    return GENERATED


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="the memory cap reads /proc")
@pytest.mark.parametrize("what", sorted(_NOT_FILES))
def test_dvc_yaml_check_refuses_what_is_not_a_file_naming_it(
    tmp_path: Path, generated: str, what: str
) -> None:
    output = tmp_path / "dvc.yaml"
    kind = _NOT_FILES[what](output)
    with _no_wait_for_good(), _memory_bound():
        result = CliRunner().invoke(dvc_yaml, ["--check", "--output", str(output)])
    assert isinstance(result.exception, SystemExit), repr(result.exception)  # refused, said: no traceback
    if what == "a folder":  # click's own look at --output refuses it first
        assert result.exit_code == 2 and "is a directory" in result.output, result.output
        return
    assert result.exit_code == 1, result.output
    if "link" in what:  # a link out of the project is refused before it is opened (project_files)
        assert f"{output}: a link to /dev/zero, which lies outside the project" in result.output
        return
    assert f"{output}: not readable (it is {kind}, not a file)" in result.output
    assert "Fix: run `judgeloop dvc-yaml`" in result.output


@pytest.mark.parametrize(
    ("written", "said"),
    [
        (None, "is not the generated one"),
        (GENERATED, "is up to date"),
        (GENERATED + "# edited\n", "is not the generated one"),
        (GENERATED.replace("\n", "\r\n"), "is not the generated one"),  # not the bytes DVC would read
    ],
)
def test_dvc_yaml_check_compares_the_bytes_written(
    tmp_path: Path, generated: str, written: str | None, said: str
) -> None:
    output = tmp_path / "dvc.yaml"
    if written is not None:
        output.write_bytes(written.encode("utf-8"))
    result = CliRunner().invoke(dvc_yaml, ["--check", "--output", str(output)])
    assert said in result.output and result.exit_code == (0 if said == "is up to date" else 1), result.output


def test_dvc_yaml_check_refuses_a_file_that_is_not_utf8_as_not_the_generated_one(
    tmp_path: Path, generated: str
) -> None:
    output = tmp_path / "dvc.yaml"
    output.write_bytes(b"stages: \xff\n")
    result = CliRunner().invoke(dvc_yaml, ["--check", "--output", str(output)])
    assert result.exit_code == 1 and "is not the generated one" in result.output, result.output


def test_the_manifest_s_requests_are_read_back_through_the_descriptor_checked(
    exported: Path,  # noqa: F811
) -> None:
    """Read back from the file checked when it was opened, whatever is put at its path later: a pipe
    there was opened again, through the path, and waited on for good."""
    manifest = Manifest(exported, ModelIdentity(backend="openai", name="test-model", digest="rev-1"))
    try:
        key = next(iter(manifest))
        (exported / MANIFEST_FILE).unlink()
        os.mkfifo(exported / MANIFEST_FILE)
        with _no_wait_for_good():
            request = manifest.request(key)
    finally:
        manifest.close()
    assert request_key(manifest.identity, request) == key


def test_ingest_reads_both_passes_from_one_descriptor(
    exported: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The answers whose digests the first pass took are the answers the second stores: a pipe put
    at the results file's path between the passes is never opened (before: the second pass opened
    the path again)."""
    results = exported / "results.jsonl"
    results.write_text("".join(json.dumps(answer) + "\n" for answer in _answers(exported)), encoding="utf-8")
    first_pass = _Ingest.first_pass

    def then_swapped(self: _Ingest) -> None:
        first_pass(self)
        results.unlink()
        os.mkfifo(results)

    monkeypatch.setattr(_Ingest, "first_pass", then_swapped)
    with _no_wait_for_good():
        outcome = ingest(load_params(), results, exported)
    assert (outcome.stored, outcome.refused, outcome.errors) == (2, [], [])


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="the memory cap reads /proc")
@pytest.mark.parametrize("what", sorted(_NOT_FILES))
def test_a_results_file_that_is_not_a_file_is_named_as_such(
    exported: Path,  # noqa: F811
    what: str,
) -> None:
    results = exported / "results.jsonl"
    kind = _NOT_FILES[what](results)
    said = rf"results\.jsonl: cannot be read \(it is {kind}, not a file\)"
    with _no_wait_for_good(), _memory_bound(), pytest.raises(ConfigError, match=said):
        ingest(load_params(), results, exported)


def test_a_missing_results_file_is_named_as_missing(exported: Path) -> None:  # noqa: F811
    with pytest.raises(ConfigError, match=r"results\.jsonl: no such results file\. Fix: name the file"):
        ingest(load_params(), exported / "results.jsonl", exported)


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="the memory cap reads /proc")
@pytest.mark.parametrize("what", sorted(_NOT_FILES))
def test_the_runners_refuse_a_requests_file_that_is_not_a_file(tmp_path: Path, what: str) -> None:
    """What the Ray runner reads of requests.jsonl itself (whether it holds a request, where its
    stretches start) and what its workers read: never a pipe waited on, nor a device read."""
    path = tmp_path / REQUESTS_FILE
    kind = _NOT_FILES[what](path)
    said = rf"requests\.jsonl: cannot be read \(it is {kind}, not a file\)"
    with _no_wait_for_good(), _memory_bound():
        with pytest.raises(ConfigError, match=said):
            _has_requests(path)
        with pytest.raises(NotARegularFile, match=f"it is {kind}"):
            stretches(path, 2)
        with pytest.raises(NotARegularFile, match=f"it is {kind}"):
            list(_lines(str(path), 0, 100))


@pytest.mark.parametrize("leads", ["out", "inside"])
def test_dvc_yaml_check_refuses_a_dvc_yaml_linked_out_of_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, generated: str, leads: str
) -> None:
    """As every reader of a config file refuses one (pipeline.llm.project_files): a committed link
    `dvc.yaml -> /elsewhere` is never read, even where what it leads to is the generated text."""
    project, outside = tmp_path / "project", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    monkeypatch.chdir(project)
    target = (outside if leads == "out" else project) / "pipeline.yaml"
    target.write_text(generated, encoding="utf-8")
    Path("dvc.yaml").symlink_to(target)
    result = CliRunner().invoke(dvc_yaml, ["--check"])
    if leads == "inside":
        assert result.exit_code == 0 and "dvc.yaml is up to date" in result.output, result.output
        return
    assert result.exit_code == 1, result.output
    assert f"dvc.yaml: a link to {target}, which lies outside the project ({project})" in result.output
    assert "Fix: replace the link with the file" in result.output
