"""A sixth design, added as its own package: one folder (params, two stages, a metric, a report),
registered through the `judgeloop.designs` entry point, and one params.yaml section; with no other
file edited, it runs through real `dvc repro` (a temporary git repository), `judgeloop status`,
`audit` and `report`, and replays byte for byte. docs/adding-a-design.md is written from this test.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

pytestmark = pytest.mark.slow

# The design's folder: what docs/adding-a-design.md shows, file by file.
PARAMS = '''\
"""The `concise` section of params.yaml."""

from pydantic import Field

from pipeline.llm.settings import EngineSettings, Section


class ConciseSettings(Section):
    texts: str = "data/concise.jsonl"  # one {"id", "text"} object a line
    max_attempts: int = Field(2, ge=1)
    out: str = "outputs/concise/judgements.jsonl"
    metrics_out: str = "outputs/concise/metrics.json"
    html_report: str = "outputs/concise/report.html"


class ConciseParams(EngineSettings):
    concise: ConciseSettings = Field(default_factory=ConciseSettings)
'''

JUDGE = '''\
"""The judge step: every text rated 1-5 for concision, under a JSON schema."""

from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, Field

from acme_designs.concise.params import ConciseParams
from pipeline.data.jsonl import Result
from pipeline.experiments.steps import LLMStep, counted, jsonl_output
from pipeline.llm.runner import iter_items
from pipeline.llm.session import LLMSession
from pipeline.llm.structured import StructuredFailure, ask_structured
from pipeline.llm.types import CallContext, Message

STAGE = "concise_judge"


class Text(BaseModel):
    id: str
    text: str


class Rating(BaseModel):
    score: int = Field(ge=1, le=5)


class Judgement(Result):
    item: str
    score: int | None  # None: no valid reply after the re-asks, counted, never a default
    failure: str | None = None


def read_texts(params: ConciseParams) -> list[Text]:
    lines = Path(params.concise.texts).read_text(encoding="utf-8").splitlines()
    return [Text.model_validate_json(line) for line in lines if line.strip()]


def judge(params: ConciseParams, session: LLMSession, texts: list[Text]) -> Iterator[Judgement]:
    def one(text: Text) -> Judgement:
        prompt = f"Rate how concise this text is, 1 (rambling) to 5 (tight).\\n\\n{text.text}"
        context = CallContext(stage=STAGE, item=text.id, step=0)
        result = ask_structured(
            session, [Message(role="user", content=prompt)], Rating, params.llm.options, context,
            max_attempts=params.concise.max_attempts,
        )
        if isinstance(result, StructuredFailure):
            return Judgement(item=text.id, score=None, failure=result.kind)
        return Judgement(item=text.id, score=result.value.score)

    return iter_items(session, texts, one, STAGE)


STEP: LLMStep[ConciseParams, list[Text], Judgement] = LLMStep(
    inputs=lambda params, _: read_texts(params),
    items=lambda texts: [t.id for t in texts],
    stream=judge,
    output=jsonl_output(Judgement),
    done=counted(lambda j: j.score is None, "judgements", "unscored"),
)
'''

AGGREGATE = '''\
"""The aggregate stage: metrics.json and the page."""

import json
from pathlib import Path
from typing import Any

from acme_designs.concise.judge import Judgement
from acme_designs.concise.params import ConciseParams
from pipeline.data.jsonl import read_jsonl
from pipeline.reports.templating import make_environment

TEMPLATES = Path(__file__).resolve().parent / "templates"


def metrics(params: ConciseParams) -> tuple[list[Judgement], dict[str, Any]]:
    judgements = read_jsonl(Path(params.concise.out), Judgement)
    scores = [j.score for j in judgements if j.score is not None]
    summary = {
        "items": len(judgements),
        "scored": len(scores),
        "mean": round(sum(scores) / len(scores), 4) if scores else None,
    }
    return judgements, summary


def report(params: ConciseParams) -> list[Path]:
    judgements, summary = metrics(params)
    page = Path(params.concise.html_report)
    template = make_environment(TEMPLATES).get_template("concise.html.j2")
    page.write_text(template.render(judgements=judgements, metrics=summary), encoding="utf-8")
    return [page]


def run(params: ConciseParams) -> None:
    _, summary = metrics(params)
    out = Path(params.concise.metrics_out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\\n", encoding="utf-8")
    report(params)
'''

TEMPLATE = """\
<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>concision</title></head><body>
<h1>Concision: mean {{ metrics.mean }} over {{ metrics.scored }} of {{ metrics["items"] }} texts</h1>
<table>{% for j in judgements %}<tr><td>{{ j.item }}</td><td>{{ j.score }}</td></tr>{% endfor %}</table>
</body></html>
"""

DESIGN = '''\
"""Concision (a sixth design): concise_judge -> concise_aggregate."""

from acme_designs.concise.params import ConciseParams
from pipeline.experiments.design import Design, Stage

DESIGN = Design(
    name="concise",
    title="how concise a text is",
    params=ConciseParams,
    stages=(
        Stage(
            "concise_judge",
            run="acme_designs.concise.judge:STEP",
            deps=("${concise.texts}",),
            outs=("${concise.out}",),
            params=("concise.texts", "concise.max_attempts", "concise.out"),
        ),
        Stage(
            "concise_aggregate",
            run="acme_designs.concise.aggregate:run",
            deps=("${concise.out}",),
            outs=("${concise.html_report}",),
            metrics=("${concise.metrics_out}",),
        ),
    ),
    report="acme_designs.concise.aggregate:report",
)
'''

# The registration: what `pip install` of a package declaring the entry point leaves on the path.
ENTRY_POINTS = """\
[judgeloop.designs]
concise = acme_designs.concise.design:DESIGN
"""

# Its section of params.yaml: every value its stages' paths name (DVC reads them there).
SECTION = """
concise:
  texts: data/concise.jsonl
  max_attempts: 2
  out: outputs/concise/judgements.jsonl
  metrics_out: outputs/concise/metrics.json
  html_report: outputs/concise/report.html
"""
TEXTS = [
    {"id": "t1", "text": "Short and to the point."},
    {"id": "t2", "text": "This sentence, which goes on and on, says in many words what a few would say."},
    {"id": "t3", "text": "Ship it."},
]
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}
OUTPUTS = ("outputs/concise/judgements.jsonl", "outputs/concise/metrics.json", "outputs/concise/report.html")


def write_design(root: Path) -> None:
    """The new design: a folder of its package, and the package's registration."""
    folder = root / "acme_designs" / "concise"
    (folder / "templates").mkdir(parents=True)
    (root / "acme_designs" / "__init__.py").write_text("")
    files = {
        "__init__.py": "",
        "params.py": PARAMS,
        "judge.py": JUDGE,
        "aggregate.py": AGGREGATE,
        "design.py": DESIGN,
        "templates/concise.html.j2": TEMPLATE,
    }
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    info = root / "acme_designs-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-designs\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)


def _run(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(root), **env}
    full["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{full['PATH']}"
    done = subprocess.run(args, cwd=root, env=full, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{args} failed:\n{done.stdout}\n{done.stderr}"
    return done


def judgeloop(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return _run(root, sys.executable, "-m", "pipeline.tools.cli", *args, **env)


def dvc(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return _run(root, sys.executable, "-m", "dvc", *args, **env)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """This project as a user has it (its library, stage runner and params), a git and DVC repo."""
    for name in ("pipeline", "stages"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("params.yaml", ".dvcignore"):
        shutil.copy(ROOT / name, tmp_path / name)
    params = yaml.safe_load((tmp_path / "params.yaml").read_text())
    params["llm"] |= {"backend": "fake", "model": "fake-model"}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    _run(tmp_path, "git", "init", "-q")
    dvc(tmp_path, "init", "-q")
    return tmp_path


def _add_the_design(project: Path) -> None:
    """One folder, its data and one params section; dvc.yaml generated: the new stages join it,
    their code deps the design's own files."""
    write_design(project)
    (project / "data").mkdir()
    (project / "data" / "concise.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TEXTS))
    with (project / "params.yaml").open("a", encoding="utf-8") as params:
        params.write(SECTION)
    judgeloop(project, "dvc-yaml")
    stages = yaml.safe_load((project / "dvc.yaml").read_text())["stages"]
    judge = stages["concise_judge"]
    assert judge["cmd"] == "python -m stages concise concise_judge"
    # Its module files are in imports.json; the stage depends on its digest of them (the code stage).
    imports = json.loads((project / "stages/code/imports.json").read_text())["stages"]
    assert "stages/code/concise_judge.json" in judge["deps"] and "pipeline/llm" in judge["deps"]
    assert "acme_designs/concise/judge.py" in imports["concise_judge"]
    assert "acme_designs" in stages["code"]["deps"]  # the code stage hashes it, and reruns at a change there
    assert "acme_designs/concise/aggregate.py" not in imports["concise_judge"]  # only the code it runs
    assert {"recordings/concise_judge": {"cache": False, "persist": True}} in judge["outs"]
    assert "acme_designs/concise/templates" in stages["concise_aggregate"]["deps"]


def _repro(project: Path) -> dict[str, bytes]:
    """dvc repro runs the design's stages (and no other design's); a second repro runs nothing."""
    ran = dvc(project, "repro", "concise_aggregate")
    assert "Running stage 'concise_judge'" in ran.stdout and "Running stage 'assess'" not in ran.stdout
    metrics = json.loads((project / "outputs/concise/metrics.json").read_text())
    assert metrics["items"] == 3 and metrics["scored"] == 3 and 1 <= metrics["mean"] <= 5
    recorded = {name: (project / name).read_bytes() for name in OUTPUTS}
    assert len((project / "recordings/concise_judge/calls.jsonl").read_text().splitlines()) == 3
    assert "Running stage" not in dvc(project, "repro", "concise_aggregate").stdout
    return recorded


def _status_audit_and_report(project: Path, recorded: dict[str, bytes]) -> None:
    # status: the design's stage is dry-run like any other, from its recordings.
    prediction = json.loads(judgeloop(project, "status", "--all", "--json").stdout)
    [concise] = [s for s in prediction["stages"] if s["stage"] == "concise_judge"]
    counts = (concise["calls"], concise["recorded"], concise["model_calls"], concise["exact"])
    assert counts == (3, 3, 0, True)
    assert "concise_aggregate" in {s["stage"] for s in prediction["stages"]}

    # audit: each call's exact prompt and reply.
    calls = judgeloop(project, "audit", "--stage", "concise_judge", "--format", "jsonl").stdout.splitlines()
    assert sorted(json.loads(c)["context"]["item"] for c in calls) == ["t1", "t2", "t3"]
    assert "Ship it." in judgeloop(project, "audit", "--stage", "concise_judge", "--item", "t3").stdout

    # report: the page again, as the stage wrote it.
    (project / "outputs/concise/report.html").unlink()
    assert "concise: wrote outputs/concise/report.html" in judgeloop(project, "report", "concise").stdout
    assert (project / "outputs/concise/report.html").read_bytes() == recorded["outputs/concise/report.html"]


def test_a_sixth_design_runs_through_dvc_status_audit_and_report(project: Path) -> None:
    before = {p: p.read_bytes() for p in (project / "pipeline").rglob("*.py")}
    _add_the_design(project)
    recorded = _repro(project)
    _status_audit_and_report(project, recorded)

    # A collaborator's clone: no local cache and no outputs, only the recordings: a replay makes
    # every output again, byte for byte.
    shutil.rmtree(project / ".judgeloop")
    shutil.rmtree(project / "outputs/concise")
    replayed = dvc(project, "repro", "concise_aggregate", JUDGELOOP_CACHE_MODE="replay")
    assert "Running stage 'concise_judge'" in replayed.stdout
    assert "3 calls, 3 hits, 0 misses sent to the model (cache mode replay)" in replayed.stderr
    assert {name: (project / name).read_bytes() for name in OUTPUTS} == recorded

    # No other file was edited to add it.
    assert {p: p.read_bytes() for p in (project / "pipeline").rglob("*.py")} == before
