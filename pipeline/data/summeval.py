"""SummEval: news articles, 12 systems' summaries of each, and people's 1-5 ratings of every summary.

The file is SummEval's `model_annotations.aligned.paired.jsonl` layout, one summary per line:
`id` (the article), `model_id` (the system), `decoded` (the summary), `text` (the article),
`expert_annotations` (3 experts) and `turker_annotations` (5 crowd workers), each a list of
{coherence, consistency, fluency, relevance}: integers 1-5. The real corpus stays outside the
repository (../shared/corpora/summeval, read its SOURCE.md); data/summeval-demo/ is a tiny
fictional set in the same layout that we wrote, so the committed demo needs no corpus.

An item is one summary, `"<article id>/<system>"`; its group is the article, its system the model.

The subset for a cold embedded run (`documents()` with n=10, all 12 systems, coherence and
relevance = 240 judge calls), and why it fits in 15 minutes on 2 cores:
- SmolLM2-135M on 2 cores evaluates a prompt at ~250 tokens/s and generates at ~85 tokens/s.
- Measured with its tokenizer on the whole corpus: an article is 143-753 tokens (mean 474), a
  summary 9-150 (mean 76), the rubric and answer line ~146. The 10 articles chosen total 5,461.
- Without any prefix re-use: 2 dimensions x 12 systems x 5,461 article tokens + 240 x (146 + 76)
  = 184k prompt tokens = 738 s, plus a one-line answer (<= 16 tokens, 0.19 s) per call = 46 s:
  13 min, the ceiling.
- With the embedded backend's prefix re-use (rubric and article open the prompt, the 12 summaries
  of one article follow each other): 20 first calls x ~768 tokens + 220 x ~165 tokens (a partial
  128-token batch of the article, the summary, the answer line) = 52k tokens = 207 s, plus 46 s
  of answers, plus at most 72 s of format re-asks: about 5.5 minutes.
- Measured, 8 warm calls on one article (2 cores shared with other jobs, so an upper bound): a
  call after the article's first took 0.9-1.2 s, as estimated; cold first calls 10-22 s.
- The fictional demo set (3 articles of 154-186 tokens x 4 summaries x 4 dimensions = 48 calls)
  is 17k prompt tokens without re-use: about 70 s plus answers.
Which 10 articles: the first 10 in the order of sha256(article id), a fixed pseudo-random draw that
does not depend on the file's order or on article length. Why coherence and relevance: their
ratings spread over the scale (no article has constant expert means), whereas consistency and
fluency are rated 5 in ~80% of cases, so 10 articles would give their summary-level correlation
only a few non-5 items to rank. The full set (100 articles) is `documents: null`.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pipeline.data.input_files import decode, opened, read_limited, refuse_surrogates
from pipeline.data.item_ids import FORMULA_FIX, composed, formula_problem
from pipeline.data.json_keys import REPEATED_FIX, RepeatedKey, loads_unique, repeated_problem, shown
from pipeline.data.ratings import HumanRatings
from pipeline.errors import InputError
from pipeline.llm.project_files import quoted

DIMENSIONS: tuple[str, ...] = ("coherence", "consistency", "fluency", "relevance")
Annotators = Literal["expert", "crowd"]
_ANNOTATION_KEYS: dict[Annotators, str] = {"expert": "expert_annotations", "crowd": "turker_annotations"}
FIX = (
    "use SummEval's model_annotations.aligned.paired.jsonl layout: one JSON object per line with "
    "id, model_id, decoded, text, expert_annotations and turker_annotations (lists of "
    "{coherence, consistency, fluency, relevance}, integers 1-5)"
)


@dataclass(frozen=True)
class Summary:
    document: str
    system: str
    text: str
    expert: tuple[Mapping[str, int], ...]
    crowd: tuple[Mapping[str, int], ...]

    @property
    def item(self) -> str:
        return f"{self.document}/{self.system}"


@dataclass(frozen=True)
class SummEval:
    articles: Mapping[str, str]  # article id -> text
    summaries: tuple[Summary, ...]

    @property
    def systems(self) -> list[str]:
        return sorted({s.system for s in self.summaries}, key=_system_order)


def _system_order(system: str) -> tuple[int, str]:
    digits = system.lstrip("M")
    # ASCII digits only: isdigit() holds for `²` (which int() cannot read) and, on a newer Python, for
    # digits of scripts 3.11 does not know, which would order the systems otherwise there.
    numeric = digits.isascii() and digits.isdigit()
    return (int(digits), system) if numeric else (1 << 30, system)


def corpus_file(path: Path) -> Path:
    """The annotations file: `path` itself, or the one *.jsonl[.gz] file in the folder `path`."""
    if path.is_file():
        return path
    found = sorted([*path.glob("*.jsonl"), *path.glob("*.jsonl.gz")]) if path.is_dir() else []
    if len(found) != 1:
        what = (
            "no such file or folder" if not path.exists() else f"{len(found)} .jsonl[.gz] files in the folder"
        )
        raise InputError(
            str(path), None, what, "point to SummEval's annotations file, or a folder holding only it"
        )
    return found[0]


def _lines(path: Path) -> list[str]:
    shown = str(path)
    with opened(path, shown) as file:  # one open: the size checked is the file read (and unpacked)
        if path.suffix == ".gz":
            try:
                with gzip.open(file) as unpacked:  # read no more than the limit: a gzip bomb stops there
                    data = read_limited(unpacked, shown)
            except (OSError, EOFError, zlib.error) as exc:  # zlib.error: a stream damaged inside
                raise InputError(
                    shown, None, f"not a gzip file ({exc})", "give the annotations as .jsonl or .jsonl.gz"
                ) from None
        else:
            data = read_limited(file, shown)
    text = decode(data, shown)
    if not text.strip():
        raise InputError(shown, 1, "the file is empty", "restore it, or point summeval.corpus elsewhere")
    return text.split("\n")


def _annotations(row: dict[str, Any], key: str, where: tuple[str, int]) -> tuple[dict[str, int], ...]:
    value = row.get(key, [])
    if not isinstance(value, list):
        raise InputError(*where, f'"{key}" is not a list', FIX)
    annotations = []
    for rater, ratings in enumerate(value, start=1):
        if not isinstance(ratings, dict):
            raise InputError(*where, f'"{key}" rater {rater} is not an object', FIX)
        for dimension in DIMENSIONS:
            rating = ratings.get(dimension)
            if isinstance(rating, bool) or not isinstance(rating, int) or not 1 <= rating <= 5:
                problem = f'"{key}" rater {rater}: {dimension} is {json.dumps(rating)}, not an integer 1-5'
                raise InputError(*where, problem, FIX)
        annotations.append({d: int(ratings[d]) for d in DIMENSIONS})
    return tuple(annotations)


def _text_field(row: dict[str, Any], key: str, where: tuple[str, int]) -> str:
    value = row.get(key)
    if not isinstance(value, str) or not value.strip():
        raise InputError(*where, f'"{key}" is missing or empty', FIX)
    return value


def _one_spelling(
    name: str, spellings: dict[tuple[str, str], str], where: tuple[str, int], what: str
) -> None:
    """InputError where `name` (a document's or a system's id) looks the same as one read before but
    is spelled in another Unicode form (NFC against NFD): two items a person sees as one, as two
    transcripts' or RAG rows' ids are refused (pipeline.data.item_ids.composed)."""
    first = spellings.setdefault((what, composed(name)), name)
    if first != name:
        problem = (
            f"{what} {quoted(where[0], shown(name))} looks the same as {quoted(where[0], shown(first))} "
            "on an earlier line: one name in two Unicode spellings"
        )
        raise InputError(*where, problem, "spell the id as the earlier line does")


def load_summeval(path: Path) -> SummEval:
    """Every summary of the file, in file order; a bad line is an InputError naming it."""
    source = corpus_file(path)
    articles: dict[str, str] = {}
    summaries: list[Summary] = []
    seen: dict[str, int] = {}
    spellings: dict[tuple[str, str], str] = {}  # documents' and systems' ids by their composed form
    for number, line in enumerate(_lines(source), start=1):
        if not line.strip():
            continue
        where = (str(source), number)
        try:
            row = loads_unique(line)
        except RepeatedKey as exc:  # json.loads would keep the last value silently
            raise InputError(*where, repeated_problem(exc.key, where[0]), REPEATED_FIX) from None
        except json.JSONDecodeError as exc:
            raise InputError(*where, f"not JSON ({exc.msg})", FIX) from None
        except RecursionError:  # json's parser recurses: bounded by the interpreter's stack
            raise InputError(*where, "JSON nested too deep to read", FIX) from None
        if not isinstance(row, dict):
            raise InputError(*where, "the line is not a JSON object", FIX)
        refuse_surrogates(row, *where)  # json lets "\ud800" in; no recording can hold it
        document, system = _text_field(row, "id", where), _text_field(row, "model_id", where)
        if (formula := formula_problem(document, where[0], '"id"')) is not None:  # starts the item's id
            raise InputError(*where, formula, FORMULA_FIX)
        _one_spelling(document, spellings, where, '"id"')
        _one_spelling(system, spellings, where, '"model_id"')
        article = _text_field(row, "text", where)
        if articles.setdefault(document, article) != article:
            problem = f"article {quoted(where[0], document)} has another text than on an earlier line"
            raise InputError(*where, problem, FIX)
        summary = Summary(
            document=document,
            system=system,
            text=_text_field(row, "decoded", where),
            expert=_annotations(row, "expert_annotations", where),
            crowd=_annotations(row, "turker_annotations", where),
        )
        if summary.item in seen:
            problem = f"summary {quoted(where[0], summary.item)} again (line {seen[summary.item]})"
            raise InputError(*where, problem, FIX)
        seen[summary.item] = number
        summaries.append(summary)
    if not summaries:
        raise InputError(str(source), None, "no summaries", FIX)
    return SummEval(articles, tuple(summaries))


def documents(corpus: SummEval, n: int | None) -> list[str]:
    """The first `n` article ids in sha256 order (all when n is None): a fixed pseudo-random choice."""
    ordered = sorted(corpus.articles, key=lambda d: hashlib.sha256(d.encode("utf-8")).hexdigest())
    return ordered if n is None else ordered[:n]


def subset(corpus: SummEval, n_documents: int | None, systems: Sequence[str] | None = None) -> SummEval:
    """The summaries of `documents(corpus, n_documents)` by the given systems (all when None)."""
    chosen = set(documents(corpus, n_documents))
    wanted = set(systems) if systems is not None else None
    unknown = (wanted or set()) - set(corpus.systems)
    if unknown:
        raise ValueError(f"no summaries by system(s) {', '.join(sorted(unknown))}")
    kept = tuple(
        s for s in corpus.summaries if s.document in chosen and (wanted is None or s.system in wanted)
    )
    return SummEval({d: t for d, t in corpus.articles.items() if d in chosen}, kept)


def human_ratings(
    corpus: SummEval, dimensions: Sequence[str] = DIMENSIONS, annotators: Annotators = "expert"
) -> list[HumanRatings]:
    """The rows `judgeloop calibrate` compares a judge with: one per summary and dimension."""
    rows = []
    for summary in corpus.summaries:
        raters = summary.expert if annotators == "expert" else summary.crowd
        if not raters:
            continue
        for dimension in dimensions:
            ratings = tuple(float(r[dimension]) for r in raters)
            rows.append(HumanRatings(item=summary.item, metric=dimension, ratings=ratings))
    return rows
