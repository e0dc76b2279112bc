"""Sizes as `judgeloop cache` prints them."""

from __future__ import annotations

from tqdm import tqdm


def human(size: int) -> str:
    return tqdm.format_sizeof(size, "B", divisor=1000)
