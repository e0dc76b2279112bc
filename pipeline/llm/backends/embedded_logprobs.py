"""Log-probabilities of the embedded model's reply, read from its logits as it generates.

llama-cpp-python computes `logprobs` only for a model loaded with logits_all, which keeps a
num_ctx x vocabulary float array (800 MB for SmolLM2 at 4096) and evaluates logits for every
prompt token. Instead a logits processor sees each step's logits (the first stage of the sampler
chain: vocabulary order, before penalties and grammar) and keeps their log-softmax until the
generator yields the token chosen from them. The processor returns the logits untouched, so the
reply is the one the same request gives without it.

The numbers are defined by the logits alone, not by numpy's build or the CPU it dispatches to (its
vectorised `exp` and `sum` differ in the last bit between versions and between AVX2 and AVX-512):
numpy only compares, selects and subtracts, which is exact, and the normaliser
log(sum(exp(logit - peak))) is the standard library's, math.exp and math.fsum (a correctly rounded
sum: Python 3.12's sum() rounds another way than 3.11's) over the logits within SPAN of the peak, in
vocabulary order. The rest add less than 2**-76 of the sum (exp(-SPAN) times the vocabulary), below
float64's last bit. The top alternatives are ordered by logit, then token id, ties at the cut
included the same way each time.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from pipeline.llm.logprobs import FLOOR
from pipeline.llm.types import TokenLogprob, TopLogprob

SPAN = 64.0  # nats below the peak logit still summed; exp(-64) * 49152 tokens < 2**-76

Step = tuple[int, float, list[tuple[int, float]]]


class LogprobRecorder:
    def __init__(self, llama: Any, top: int) -> None:
        self.llama, self.top = llama, top
        self._pending: np.ndarray | None = None
        self.steps: list[Step] = []

    def __call__(self, input_ids: Any, scores: np.ndarray) -> np.ndarray:
        self._pending = np.array(scores, dtype=np.float32)  # a copy: the sampler changes its own
        return scores

    def chosen(self, token: int) -> None:
        pending = self._pending
        if pending is None:  # a token the processor did not see (none known): nothing to say
            return
        self._pending = None
        self.steps.append(log_softmax_step(pending, token, self.top))

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


def log_softmax_step(logits: np.ndarray, token: int, top: int) -> Step:
    """The chosen token's log-probability and the `top` most likely tokens' (id, log-probability),
    from one step's float32 logits, computed as the module's docstring says."""
    peak = float(logits.max())
    # Vocabulary order; float32 -> float64 and the subtraction are exact IEEE operations in any numpy.
    offsets = (logits[logits >= peak - SPAN].astype(np.float64) - peak).tolist()
    normaliser = peak + math.log(math.fsum(map(math.exp, offsets)))
    best: list[tuple[int, float]] = []
    if top:
        cut = float(np.partition(logits, logits.size - top)[logits.size - top])  # the top-th largest value
        ids = np.flatnonzero(logits >= cut).tolist()
        ranked = sorted(ids, key=lambda i: (-float(logits[i]), i))[:top]
        best = [(i, float(logits[i]) - normaliser) for i in ranked]
    return int(token), float(logits[token]) - normaliser, best


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
