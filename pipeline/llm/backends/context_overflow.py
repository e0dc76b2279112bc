"""A prompt too long for Ollama's context window: refused, or caught from the reply's counts.

Left at its defaults, Ollama answers an overlong chat with a 200 in three ways, none of them an
error (server/prompt.go chatPrompt, runner/*/runner.go NewSequence and processBatch):
  1. it drops the oldest non-system messages until the rest fits: a judge re-ask [transcript
     prompt, unreadable reply, format reminder] loses the transcript, and prompt_eval_count is
     then far below num_ctx;
  2. if the last message alone does not fit, the runner keeps num_keep tokens plus the tail, and
     prompt_eval_count equals num_ctx ("truncating input prompt limit=4096 prompt=7268 keep=4");
  3. if the reply fills the window, it shifts the prompt's start out and goes on generating.
`truncate: false` turns 1 and 2 into 400 {"error": "the input length exceeds the context
length"}, and `shift: false` ends 3 with done_reason "length"; neither changes a call that fits.
Both arrived in 0.12.6 (ollama/ollama#12582); older servers ignore unknown keys, so the counts
checked here stay the only defence there.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from pipeline.errors import PromptTruncatedError
from pipeline.llm.types import ChatReply, ChatRequest

TRUNCATE_SINCE = (0, 12, 6)
# Until ollama/ollama#5371 (July 2024, the 0.2 line) prompt_eval_count left out the tokens served
# from the prompt cache, and a re-ask shares its whole first prompt with the first ask.
FULL_COUNT_SINCE = (0, 2, 0)
# Case 2 leaves prompt_eval_count at num_ctx. A prompt that really is within a few tokens of
# num_ctx cannot be told apart from a truncated one, and leaves no room for the reply anyway;
# 4 is Ollama's num_keep.
TRUNCATION_MARGIN = 4
# Case 1 on an old server, without a tokenizer: real text runs 2 to 5 characters per token, and the
# chat template only adds tokens, so a count under one token per 16 characters sent cannot be the
# whole prompt. Dropping the transcript-bearing message collapses the count far below that; a
# normal call stays far above it. Dropping only a short early message goes unseen, which is why an
# old server also gets a warning.
MAX_CHARS_PER_TOKEN = 16
# The runner's refusal (0.12.6+), and llama-server's, which newer releases pass through as a string:
# "request (2622 tokens) exceeds the available context size (512 tokens)", exceed_context_size_error.
OVERFLOW_WORDS = re.compile(r"exceeds? the (available )?context|exceed_context_size", re.IGNORECASE)
_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")
_FIX = "Fix: raise llm.options.num_ctx in params.yaml (or shorten the input)."


def overflowed(said: str) -> bool:
    """Whether a server's error says the prompt did not fit."""
    return OVERFLOW_WORDS.search(said) is not None


def refused(num_ctx: int, said: str) -> PromptTruncatedError:
    # Not transient: the same prompt will never fit the same window.
    return PromptTruncatedError(
        f"the prompt does not fit the context window (num_ctx={num_ctx}); Ollama refused it rather "
        f"than cut it (server said: {said}). {_FIX}"
    )


def check_counts(request: ChatRequest, reply: ChatReply, may_drop_history: Callable[[], bool]) -> None:
    """Raise if the counts show that a server which ignores `truncate` and `shift` cut the prompt
    (cases 1 to 3 above). `may_drop_history` is only asked when case 1 is possible at all."""
    num_ctx, prompt = request.options.num_ctx, reply.prompt_tokens
    if prompt is None:
        return
    if prompt >= num_ctx - TRUNCATION_MARGIN:
        raise PromptTruncatedError(
            f"the prompt filled the context window (prompt_eval_count={prompt}, "
            f"num_ctx={num_ctx}): Ollama silently cut it, so the reply is not trusted. {_FIX}"
        )
    # Every generated token but the last is fed back, so the window held prompt + eval - 1.
    if reply.completion_tokens is not None and prompt + reply.completion_tokens - 1 > num_ctx:
        raise PromptTruncatedError(
            f"the reply outgrew the context window (prompt_eval_count={prompt}, "
            f"eval_count={reply.completion_tokens}, num_ctx={num_ctx}): Ollama shifted the "
            f"prompt's start out while answering, so the reply is not trusted. {_FIX}"
        )
    # Only non-system messages before the last one can be dropped.
    if not any(m.role != "system" for m in request.messages[:-1]) or not may_drop_history():
        return
    sent = sum(len(m.content) for m in request.messages)
    if prompt * MAX_CHARS_PER_TOKEN < sent:
        raise PromptTruncatedError(
            f"prompt_eval_count={prompt} is far too few tokens for the {sent} characters sent "
            f"(under one per {MAX_CHARS_PER_TOKEN}): an Ollama older than 0.12.6 dropped the "
            f"earliest messages to fit num_ctx={num_ctx}, so the reply is not trusted. {_FIX} "
            "Ollama 0.12.6 or later refuses such a prompt outright."
        )


def parse_version(said: str) -> tuple[int, int, int] | None:
    """What /api/version said, as numbers; a source build's 0.0.0 is as good as unknown."""
    found = _VERSION.search(said)
    version = (int(found[1]), int(found[2]), int(found[3])) if found else None
    return None if version == (0, 0, 0) else version


def may_drop_history(version: tuple[int, int, int] | None) -> bool:
    """Whether a server of this version may have dropped messages unasked, with a count that shows it."""
    if version is not None and version >= TRUNCATE_SINCE:
        return False  # it honours truncate: false, so nothing was dropped
    return version is None or version >= FULL_COUNT_SINCE


def old_server_warning(url: str, said: str, version: tuple[int, int, int] | None) -> str | None:
    """What to tell the user about a server that predates `truncate`, or None for one that knows it."""
    if version is not None and version >= TRUNCATE_SINCE:
        return None
    if version is None:
        who = f"The Ollama at {url} did not say its version, so it may predate 0.12.6"
    else:
        who = f"Ollama {said} at {url} predates 0.12.6"
    if version is not None and version < FULL_COUNT_SINCE:
        what = "its prompt_eval_count leaves out cached tokens, so that cannot be detected"
    else:
        what = (
            "judgeloop detects it only when the count collapses (the transcript dropped), "
            "not when a short early message goes"
        )
    return (
        f"{who}, which added `truncate`: a re-ask whose history does not fit num_ctx has its "
        f"earliest messages dropped without an error, and {what}. Fix: upgrade Ollama to 0.12.6 "
        "or later."
    )
