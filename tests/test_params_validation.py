"""params.yaml is checked before anything runs: every value has its type and range, an unknown key
is refused with the nearest known one, and the message names the file and the line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pipeline.errors import ConfigError
from pipeline.experiments.params import load_params
from pipeline.experiments.registry import designs
from pipeline.llm.settings import LLMSettings
from tests.conftest import ROOT as REPO_ROOT

PARAMS = (REPO_ROOT / "params.yaml").read_text(encoding="utf-8")

# (the committed line, its replacement, what the message must say about it)
BAD_VALUES = [
    (
        "    temperature: 0.0",
        "    temperature: .nan",
        "llm.options.temperature: Input should be a finite number",
    ),
    (
        "    temperature: 0.0",
        "    temperature: -1",
        "llm.options.temperature: Input should be greater than or equal to 0",
    ),
    ("    top_p: 0.9", "    top_p: 7", "llm.options.top_p: Input should be less than or equal to 1"),
    ("    seed: 42", "    seed: -1", "llm.options.seed: Input should be greater than or equal to 0"),
    ("  read_timeout_s: 300", "  read_timeout_s: -5", "llm.read_timeout_s: Input should be greater than 0"),
    (
        "  connect_timeout_s: 5",
        "  connect_timeout_s: 0",
        "llm.connect_timeout_s: Input should be greater than 0",
    ),
    ("  parallelism: 1 ", "  parallelism: 0 ", "llm.parallelism: Input should be greater than or equal to 1"),
    (
        "  base_url: http://127.0.0.1:11434",
        "  base_url: 127.0.0.1:11434",
        "llm.base_url: '127.0.0.1:11434' is not an http(s) URL",
    ),
    ("  dir: .judgeloop/cache ", '  dir: "" ', "cache.dir: String should have at least 1 character"),
    ("  dir: .judgeloop/cache ", '  dir: "  " ', "cache.dir: String should match pattern"),
    ("  max_retries: 5", "  max_retries: many", "llm.max_retries: Input should be a valid integer"),
    (
        "  - coherence",  # judge.metrics, the first list with it (params.yaml is in DVC's block style)
        "  - coherance",
        "judge.metrics: unknown metric 'coherance', did you mean 'coherence'?",
    ),
    ("  threshold: 3 ", "  threshold: 9 ", "refine.threshold: Input should be less than or equal to 5"),
    ("  limit: 3 ", "  limit: -1 ", "data.limit: Input should be greater than or equal to 0"),
    ("  k: 3", "  k: -3", "selection.k: Input should be greater than or equal to 1"),
    ("  tie_margin: 0.025", "  tie_margin: .inf", "selection.tie_margin: Input should be a finite number"),
    (
        "  - fluency",  # summeval.dimensions
        "  - fluncy",
        "summeval.dimensions: unknown dimension 'fluncy', did you mean 'fluency'?",
    ),
    (
        "    answer_faithfulness: accuracy",
        "    answer_faithfulness: acuracy",
        "rag.label_scores: unknown dimension 'acuracy', did you mean 'accuracy'?",
    ),
    (
        "  threshold: 0.4 ",
        "  threshold: 1.4 ",
        "regenerate.threshold: Input should be less than or equal to 1",
    ),
    ("  out: outputs/rag/judgements.jsonl", "  out: ''", "rag.out: String should have at least 1 character"),
    # Found by redteam4: a YAML "\0" escape in a path reached the stage, whose first write of it
    # raised ValueError ("embedded null byte") as a traceback.
    (
        "  out: outputs/rag/judgements.jsonl",
        '  out: "outputs/rag/judge\\0ments.jsonl"',
        "rag.out: holds a NUL character, which no path can hold",
    ),
    (
        "  dir: .judgeloop/cache ",
        '  dir: ".judgeloop/\\0cache" ',
        "cache.dir: holds a NUL character, which no path can hold",
    ),
]

UNKNOWN_KEYS = [
    (
        "    temperature: 0.0",
        "    temprature: 0.0",
        "llm.options.temprature: unknown key; did you mean 'temperature'?",
    ),
    (
        "  read_timeout_s: 300",
        "  read_timeout: 300",
        "llm.read_timeout: unknown key; did you mean 'read_timeout_s'?",
    ),
    (
        "  num_predict: 384",
        "  num_predicts: 384",
        "rag.num_predicts: unknown key; did you mean 'num_predict'?",
    ),
    ("  pool_size: 6", "  poolsize: 6", "selection.poolsize: unknown key; did you mean 'pool_size'?"),
    ("judge:", "jugde:", "jugde: unknown key; did you mean 'judge'?"),
]


def write(tmp_path: Path, committed: str, replacement: str) -> tuple[Path, int]:
    lines = PARAMS.split("\n")
    numbers = [i for i, line in enumerate(lines) if line.startswith(committed)]
    assert numbers, f"params.yaml has no line starting {committed!r}"
    lines[numbers[0]] = replacement + lines[numbers[0]][len(committed) :]
    path = tmp_path / "params.yaml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path, numbers[0] + 1


@pytest.mark.parametrize(("committed", "replacement", "said"), BAD_VALUES + UNKNOWN_KEYS)
def test_a_bad_parameter_is_refused_naming_the_file_and_line(
    tmp_path: Path, committed: str, replacement: str, said: str
) -> None:
    path, line = write(tmp_path, committed, replacement)
    with pytest.raises(ConfigError) as caught:
        load_params(path, environ={})
    message = caught.value.message
    assert f"{path}:{line}: {said}" in message, message
    assert "Traceback" not in message


@pytest.mark.parametrize(("committed", "replacement", "said"), BAD_VALUES)
def test_the_stage_that_reads_the_section_refuses_it_too(
    tmp_path: Path, committed: str, replacement: str, said: str
) -> None:
    path, line = write(tmp_path, committed, replacement)
    section = said.split(".")[0]
    readers = [d for d in designs() if section in d.params.model_fields]
    assert readers
    for design in readers:
        with pytest.raises(ConfigError, match=re.escape(f"{path}:{line}: {said}")):
            design.load_params(path, environ={})


def test_every_problem_is_listed_in_the_order_of_the_file(tmp_path: Path) -> None:
    text = PARAMS.replace("    top_p: 0.9", "    top_p: 7").replace(
        "  read_timeout_s: 300", "  read_timeout_s: -1"
    )
    path = tmp_path / "params.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_params(path, environ={})
    message = caught.value.message
    assert "2 parameters refused" in message
    assert message.index("read_timeout_s") < message.index("top_p")


def test_a_value_set_by_an_environment_variable_names_the_variable(tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    path.write_text(PARAMS, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_params(path, environ={"JUDGELOOP_READ_TIMEOUT": "-2"})
    assert "JUDGELOOP_READ_TIMEOUT (sets llm.read_timeout_s): llm.read_timeout_s: Input should be" in (
        caught.value.message
    )


def test_the_committed_params_and_the_defaults_pass() -> None:
    load_params(REPO_ROOT / "params.yaml", environ={})
    for design in designs():
        design.params()
    LLMSettings()


def test_a_params_text_read_again_is_parsed_once_and_given_as_a_fresh_copy(tmp_path: Path) -> None:
    from pipeline.llm import settings

    path = tmp_path / "params.yaml"
    path.write_text("judge:\n  threshold: 2\n", encoding="utf-8")
    first = settings.read_params_file(path, environ={})
    first["judge"]["threshold"] = 99  # a caller's change reaches no later read
    assert settings.read_params_file(path, environ={})["judge"]["threshold"] == 2
    path.write_text("judge:\n  threshold: 3\n  threshold: 4\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="given twice"):  # a changed text is parsed and checked again
        settings.read_params_file(path, environ={})
