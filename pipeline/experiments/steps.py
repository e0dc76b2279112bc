"""A stage that calls a model, as one value the stage runner and `judgeloop status` both use.

    STEP = LLMStep(
        inputs=lambda params, upstream: (transcripts(params), upstream("assess", ASSESSMENTS)),
        items=lambda inputs: [a.item for a in inputs[1]],
        stream=lambda params, session, inputs: judge_items(params, session, *inputs),
        output=JUDGEMENTS,
    )

`inputs` reads what the stage needs: its data, and through `upstream` the results of its design's
earlier stages. The runner (stages/runner.py) reads those from their files; `judgeloop status`
gives the results its dry run of the earlier stage found, when that stage runs too. `work` makes
the calls, with no file I/O, through the session it is given: the stage's recorded one, or the
dry run's, which calls no model. `stream` yields the results in the items' order as they finish
(pipeline.llm.runner.iter_items), and the runner writes each as it comes (issue 33: a stage never
holds all its results); `work` is the same, held whole. `output` says how the results are written
(to the stage's first out) and read back, and which item each is for; `done` what the stage's end
line says of them, folded over them as they pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, runtime_checkable

from pipeline.data.jsonl import Result, read_jsonl, write_jsonl
from pipeline.data.results_file import ResultsFile
from pipeline.llm.settings import EngineSettings

if TYPE_CHECKING:  # named only: a stage that calls no model does not load the session
    from pipeline.llm.session import LLMSession

R = TypeVar("R")
P = TypeVar("P", bound=EngineSettings)
I = TypeVar("I")  # noqa: E741 (the step's inputs)


@dataclass(frozen=True)
class Output(Generic[R]):
    """How a stage's results are written and read: the item each is for, and the text in which a
    reply shows (a dry run looks there for replies not known yet)."""

    item_of: Callable[[R], str]
    text_of: Callable[[R], str]
    write: Callable[[Path, Iterable[R]], None]  # the results as they come, in the items' order
    read: Callable[[Path], list[R]] | None = None  # None: no later stage reads them as results
    # The results file read again an item at a time (pipeline.data.results_file), for a later stage
    # that reads it through a file-backed upstream (FromFiles); None: read whole.
    file: Callable[[Path], Iterable[R]] | None = None


M = TypeVar("M", bound=Result)


def jsonl_output(model: type[M]) -> Output[M]:
    """Results written one model a line, sorted by item (pipeline.data.jsonl); `model` has an `item`."""

    def item_of(result: M) -> str:
        return str(getattr(result, "item"))  # noqa: B009 (Result does not declare it; each model does)

    return Output(
        item_of,
        lambda r: r.model_dump_json(),
        write_jsonl,
        lambda path: read_jsonl(path, model),
        lambda path: ResultsFile(path, model, item_of),
    )


class Upstream(Protocol):
    """The results of an earlier stage of the same design."""

    def __call__(self, stage: str, output: Output[R]) -> list[R]: ...


@runtime_checkable
class FromFiles(Protocol):
    """An upstream that reads the earlier stages' files (the stage runner's), and can hand one on
    to be read again an item at a time rather than whole."""

    def __call__(self, stage: str, output: Output[R]) -> list[R]: ...

    def file(self, stage: str, output: Output[R]) -> Iterable[R]: ...


def results_of(upstream: Upstream, stage: str, output: Output[R]) -> Iterable[R]:
    """An earlier stage's results, read again from its file an item at a time where the upstream
    reads files (issue 33: a stage then never holds them whole), else as the upstream holds them (a
    dry run's results, in `judgeloop status`). Both are iterated again, in the file's order."""
    return upstream.file(stage, output) if isinstance(upstream, FromFiles) else upstream(stage, output)


def share(count: int, total: int, what: str, state: str) -> str:
    """A step's outcome for its end line, e.g. "1 of 12 judgements unscored"."""
    return f"{count} of {total} {what} {state}"


def no_decision_on_unknown(_: Any) -> bool:
    return False


S = TypeVar("S")


@dataclass(frozen=True)
class Done(Generic[R, S]):
    """What a stage's end line says of its results, without holding them: `of` keeps what one
    result adds (a flag, a few counts: small), `said` words the end line from those."""

    of: Callable[[R], S]
    said: Callable[[list[S]], str]

    def __call__(self, results: Iterable[R]) -> str:
        return self.said([self.of(r) for r in results])


def counted(test: Callable[[R], bool], what: str, state: str) -> Done[R, bool]:
    """The end line "n of N <what> <state>", n the results that pass `test`."""
    return Done(test, lambda flags: share(sum(flags), len(flags), what, state))


@dataclass(frozen=True)
class LLMStep(Generic[P, I, R]):
    """A stage that calls a model (see the module's docstring).

    decides_on_unknown: whether, with these params, the step takes a decision on a reply without
    sending it back (refine with unscored_triggers false stops on an unscored metric): a dry run's
    placeholder reply then cannot be told from a real one, and its count is a lower bound.
    done: what the stage's end line adds, from the results: how many were left unscored (or
    invalid), which are counted, never given a default (e.g. `share(1, 12, "judgements", "unscored")`)."""

    inputs: Callable[[P, Upstream], I]
    items: Callable[[I], list[str]]
    stream: Callable[[P, LLMSession, I], Iterable[R]]
    output: Output[R]
    decides_on_unknown: Callable[[P], bool] = no_decision_on_unknown
    done: Done[R, Any] | None = None

    def work(self, params: P, session: LLMSession, inputs: I) -> list[R]:
        """The step's results, held whole (a dry run looks at them all)."""
        return list(self.stream(params, session, inputs))
