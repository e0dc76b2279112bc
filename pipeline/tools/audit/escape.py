"""What `judgeloop audit` prints of a model's reply on a terminal: control characters made visible.

A reply is whatever the model wrote, and a model (or a prompt-injected document it quotes) can write
terminal escape sequences, bidi overrides, zero-width and tag characters. The escaping is the one
every command uses (pipeline.llm.terminal.shown); `--raw` prints the text as recorded, and
`--format jsonl` is JSON, escaped by its own rules.
"""

from __future__ import annotations

from pipeline.llm.terminal import shown


def escape_controls(text: str) -> str:
    """`text` with every control and invisible character but newline and tab shown as its escape."""
    return shown(text)
