"""Re-using evaluated prompt prefixes in llama.cpp without changing a single reply.

A call's reply must not depend on the calls before it, or a resumed run would answer differently
from a whole one. llama.cpp's own prefix reuse breaks that (seen here: one re-ask's reply in 24
changed). A number computed for a token depends on the batch it was evaluated in: the reply's tokens
were evaluated one by one as they were generated, a fresh evaluation of a re-ask takes them in a
batch, and a prompt evaluated from token 700 is split into batches at other places than one
evaluated from token 0. So reuse keeps only whole batches of a previous *prompt*: the remaining
batches then start at the same positions and hold the same tokens as in a fresh evaluation, and
every number is the one a fresh call computes (tests/test_embedded.py compares the logits).

Two sources of a reusable prefix, both cut down to whole prompt batches:
- the context the previous call left behind: a re-ask (the first ask, its reply, a reminder)
  re-evaluates only from the first ask's last partial batch;
- snapshots of earlier prompts' whole batches, a few kept in memory: the same judge rubric and
  transcript open that metric's prompt in every iteration of an item.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

MAX_SNAPSHOTS = 8  # a judge prompt per metric plus the regeneration prompt, for the item in hand
SEQUENCE = 0  # llama-cpp-python evaluates everything as sequence 0


def common_prefix(a: Sequence[int] | np.ndarray, b: Sequence[int] | np.ndarray) -> int:
    n = min(len(a), len(b))
    differ = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(differ[0]) if differ.size else n


def whole_batches(common: int, prompt_length: int, batch: int) -> int:
    """The longest reusable prefix: whole batches, short of the whole prompt (its last token must
    be evaluated anew to give the logits to sample from)."""
    return min(common, prompt_length - 1) // batch * batch


def batch_aligned_llama(base: type[Any]) -> type[Any]:
    """A subclass of llama_cpp.Llama (passed in, so that importing this module loads no llama.cpp)
    whose prompt evaluation reuses whole batches only."""
    import llama_cpp

    class BatchAlignedLlama(base):  # type: ignore[misc]
        n_tokens: int  # the base class's: how many leading tokens the context holds

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._snapshots: OrderedDict[bytes, tuple[np.ndarray, bytes]] = OrderedDict()
            self.snapshot_restores = 0  # for tests and curiosity
            self._prompt_length = 0  # the context's leading tokens that came from a prompt, not generation

        def generate(self, tokens: Sequence[int], *args: Any, **kwargs: Any) -> Any:
            if kwargs.get("reset", True):
                self._prepare(np.asarray(tokens, dtype=np.intc))
            # The base class now finds exactly the prefix kept below and evaluates the rest.
            return super().generate(tokens, *args, **kwargs)

        def _prepare(self, prompt: np.ndarray) -> None:
            if self._is_recurrent or self._is_hybrid:
                self._forget()  # their state cannot be cut back to a prefix: no reuse
                return
            batch = self.n_batch
            context = self._input_ids[: min(self.n_tokens, self._prompt_length)]
            keep = whole_batches(common_prefix(context, prompt), len(prompt), batch)
            best: bytes | None = None
            for name, (snapshot_tokens, _) in self._snapshots.items():
                usable = whole_batches(common_prefix(snapshot_tokens, prompt), len(prompt), batch)
                if usable > keep:
                    keep, best = usable, name
            if best is not None:
                self._restore(best)
            if not self._ctx.kv_cache_seq_rm(-1, keep, -1):
                self._forget()
                keep = 0
            self.n_tokens = keep
            self._prompt_length = len(prompt)
            end = whole_batches(len(prompt), len(prompt), batch)
            if end > keep:
                self.eval(prompt[keep:end].tolist())
                self._snapshot(prompt[:end])

        def _snapshot(self, tokens: np.ndarray) -> None:
            name = tokens.tobytes()
            if name in self._snapshots:
                self._snapshots.move_to_end(name)
                return
            size = llama_cpp.llama_state_seq_get_size(self._ctx.ctx, SEQUENCE)
            buffer = (ctypes.c_uint8 * size)()
            written = llama_cpp.llama_state_seq_get_data(self._ctx.ctx, buffer, size, SEQUENCE)
            self._snapshots[name] = (tokens.copy(), ctypes.string_at(buffer, written))
            while len(self._snapshots) > MAX_SNAPSHOTS:
                self._snapshots.popitem(last=False)

        def _restore(self, name: bytes) -> None:
            tokens, state = self._snapshots[name]
            self._snapshots.move_to_end(name)
            self._forget()  # should the restore fail, no stale prefix may be trusted afterwards
            buffer = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
            if llama_cpp.llama_state_seq_set_data(self._ctx.ctx, buffer, len(state), SEQUENCE) != len(state):
                raise RuntimeError("llama.cpp could not restore a prompt snapshot")
            self.input_ids[: len(tokens)] = tokens
            self.n_tokens = len(tokens)
            self.snapshot_restores += 1

        def _forget(self) -> None:
            """An empty context: nothing of it is reused."""
            if not self._ctx.kv_cache_seq_rm(-1, 0, -1):
                self._ctx.kv_cache_clear()
            self.n_tokens = 0
            self._prompt_length = 0

        def load_state(self, state: Any) -> None:
            super().load_state(state)
            self._prompt_length = 0  # a saved state's tokens may include generated ones

    return BatchAlignedLlama
