"""Where the selection's stages write. Each writes one canonical JSON line per request, in file
order (pipeline.data.jsonl.write_records), so a replay writes the same bytes."""

from __future__ import annotations

from pathlib import Path

OUT_DIR = Path("outputs/selection")
SCORES = OUT_DIR / "scores.jsonl"
PICKS = OUT_DIR / "picks.jsonl"
METRICS = OUT_DIR / "metrics.json"
PAGE = OUT_DIR / "report.html"
