"""Log-probabilities of the embedded model's reply, read from its logits as it generates.

llama-cpp-python computes `logprobs` only for a model loaded with logits_all, which keeps a
num_ctx x vocabulary float array (800 MB for SmolLM2 at 4096) and evaluates logits for every
prompt token. Instead a logits processor sees each step's logits (the first stage of the sampler
chain: vocabulary order, before penalties and grammar) and keeps their log-softmax until the
generator yields the token chosen from them. The processor returns the logits untouched, so the
reply is the one the same request gives without it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from pipeline.llm.logprobs import FLOOR
from pipeline.llm.types import TokenLogprob, TopLogprob


class LogprobRecorder:
    def __init__(self, llama: Any, top: int) -> None:
        self.llama, self.top = llama, top
        self._pending: np.ndarray | None = None
        self.steps: list[tuple[int, float, list[tuple[int, float]]]] = []

    def __call__(self, input_ids: Any, scores: np.ndarray) -> np.ndarray:
        logits = scores.astype(np.float64)
        peak = logits.max()
        self._pending = logits - (peak + np.log(np.exp(logits - peak).sum()))
        return scores

    def chosen(self, token: int) -> None:
        pending = self._pending
        if pending is None:  # a token the processor did not see (none known): nothing to say
            return
        self._pending = None
        top: list[tuple[int, float]] = []
        if self.top:
            best = np.argpartition(-pending, self.top - 1)[: self.top]
            best = best[np.argsort(-pending[best], kind="stable")]
            top = [(int(i), float(pending[i])) for i in best]
        self.steps.append((int(token), float(pending[token]), top))

    def result(self, completion_tokens: int | None) -> tuple[TokenLogprob, ...]:
        """One entry per token of the reply (an end-of-generation token is not part of it)."""
        steps = self.steps if completion_tokens is None else self.steps[:completion_tokens]
        ids = [token for token, _, _ in steps]
        out = []
        for index, (token, logprob, top) in enumerate(steps):
            before = ids[:index]
            out.append(
                TokenLogprob(
                    token=self._text(token, before),
                    logprob=max(logprob, FLOOR),
                    top=tuple(
                        TopLogprob(token=self._text(i, before), logprob=max(lp, FLOOR)) for i, lp in top
                    ),
                )
            )
        return tuple(out)

    def _text(self, token: int, before: Sequence[int]) -> str:
        piece: bytes = self.llama.detokenize([token], prev_tokens=list(before))
        return piece.decode("utf-8", errors="ignore")


def recording_llama(base: type[Any]) -> type[Any]:
    """A subclass of a llama_cpp.Llama class whose generate() tells `recorder` each chosen token."""

    class RecordingLlama(base):  # type: ignore[misc]
        recorder: LogprobRecorder | None = None

        def generate(self, tokens: Sequence[int], *args: Any, **kwargs: Any) -> Iterator[int]:
            inner = super().generate(tokens, *args, **kwargs)
            recorder = self.recorder
            sent = None
            while True:
                try:
                    token = inner.send(sent)
                except StopIteration:
                    return
                if recorder is not None:
                    recorder.chosen(token)
                sent = yield token

    return RecordingLlama
