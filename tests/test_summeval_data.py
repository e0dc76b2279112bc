"""The SummEval loader, on the fictional demo set we ship and (when ../shared is there) the real corpus."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest

from pipeline.data.summeval import documents, human_ratings, load_summeval, subset
from pipeline.errors import InputError
from pipeline.experiments.summeval.prompts import DIMENSIONS, rubric_prompt
from pipeline.stats.reliability import ordinal_alpha
from tests.conftest import ROOT, shared_dir

DEMO = ROOT / "data" / "summeval-demo"
CORPUS = shared_dir() / "corpora" / "summeval"
RATED_1 = {"coherence": 1, "consistency": 1, "fluency": 1, "relevance": 1}


def test_the_demo_set_loads_as_3_articles_by_4_systems_with_3_ratings_each() -> None:
    corpus = load_summeval(DEMO)
    assert len(corpus.articles) == 3 and corpus.systems == ["D1", "D2", "D3", "D4"]
    assert len(corpus.summaries) == 12
    rows = human_ratings(corpus, ("coherence", "relevance"))
    assert len(rows) == 24 and all(len(r.ratings) == 3 for r in rows)
    assert rows[0].item == "demo-001/D1" and rows[0].metric == "coherence"


def test_the_subset_is_chosen_by_hash_not_by_file_order(tmp_path: Path) -> None:
    lines = (DEMO / "summeval-demo.jsonl").read_text(encoding="utf-8").splitlines()
    reversed_file = tmp_path / "reversed.jsonl.gz"
    reversed_file.write_bytes(gzip.compress("\n".join(reversed(lines)).encode("utf-8")))
    forward, backward = load_summeval(DEMO), load_summeval(reversed_file)
    assert documents(forward, 2) == documents(backward, 2)
    chosen = subset(forward, 2, systems=["D1", "D3"])
    assert {s.document for s in chosen.summaries} == set(documents(forward, 2))
    assert {s.system for s in chosen.summaries} == {"D1", "D3"} and len(chosen.summaries) == 4
    with pytest.raises(ValueError, match="M99"):
        subset(forward, 2, systems=["M99"])


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"expert_annotations": [{**RATED_1, "coherence": 6}]}, "not an integer 1-5"),
        ({"decoded": ""}, '"decoded" is missing or empty'),
        ({"model_id": "D1"}, "summary demo-001/D1 again (line 1)"),
        ({"text": "another text"}, "another text than on an earlier line"),
    ],
)  # fmt: skip
def test_a_bad_line_is_reported_with_file_and_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: dict[str, object], problem: str
) -> None:
    monkeypatch.chdir(tmp_path)  # a file of the project: the item is named (pipeline.llm.project_files)
    lines = (DEMO / "summeval-demo.jsonl").read_text(encoding="utf-8").splitlines()
    bad = {**json.loads(lines[1]), **change}
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([lines[0], json.dumps(bad), *lines[2:]]) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bad\.jsonl:2: ") as raised:
        load_summeval(path)
    assert problem in str(raised.value) and "Fix:" in str(raised.value)


def test_rubric_prompts_put_the_shared_rubric_and_article_before_the_summary() -> None:
    for dimension in DIMENSIONS:
        a = rubric_prompt(dimension, "The {summary} article.", "First summary.")
        b = rubric_prompt(dimension, "The {summary} article.", "Second summary.")
        prefix = a[: a.index("First summary.")]
        assert b.startswith(prefix) and "The {summary} article." in prefix
        assert dimension in prefix and a.rstrip().endswith("from 1 to 5).")
    with pytest.raises(ValueError, match="unknown SummEval dimension"):
        rubric_prompt("informativeness", "a", "b")


@pytest.mark.skipif(
    not CORPUS.is_dir(), reason=f"the SummEval corpus is not at {CORPUS} (kept outside the repo)"
)
def test_the_real_corpus_loads_and_the_experts_agree_among_themselves() -> None:
    corpus = load_summeval(CORPUS)
    assert len(corpus.articles) == 100 and len(corpus.systems) == 12 and len(corpus.summaries) == 1200
    for dimension in DIMENSIONS:
        rows = human_ratings(corpus, (dimension,))
        assert len(rows) == 1200 and {len(r.ratings) for r in rows} == {3}
        alpha = ordinal_alpha([r.ratings for r in rows])
        assert math.isfinite(alpha) and 0 < alpha <= 1, (dimension, alpha)
    assert len(subset(corpus, 10).summaries) == 120
