"""How `judgeloop status` shows a prediction: a short text report, or one JSON object."""

from __future__ import annotations

from typing import Any

from pipeline.llm.terminal import guarded
from pipeline.tools.status.prediction import Prediction, StageStatus


def _count(status: StageStatus, mode: str) -> str:
    probe = status.probe
    assert probe is not None
    bound = "" if status.exact else "at least "
    text = f"{bound}{probe.calls} calls: {probe.recorded} recorded"
    if probe.local_only:
        text += f" ({probe.local_only} only in the local cache, not in the recordings)"
    if probe.repeats:
        text += f", {probe.repeats} repeat a new call"
    text += f", {bound}{status.model_calls(mode)} to the model"
    return text + (" (exact)" if status.exact else "")


def summary_line(prediction: Prediction) -> str:
    count = f"{'' if prediction.exact else 'at least '}{prediction.model_calls}"
    if prediction.mode == "replay":
        if prediction.model_calls == 0 and prediction.exact:
            return "the next `dvc repro` replays every call it needs: an offline replay will succeed"
        return f"the next `dvc repro` (cache.mode replay) will fail: {count} call(s) are not recorded"
    if prediction.model_calls == 0 and prediction.exact and prediction.mode == "auto":
        return "the next `dvc repro` needs 0 model calls: an offline replay will succeed"
    return f"the next `dvc repro` needs {count} model call(s)"


def render_text(prediction: Prediction, verbose: bool) -> str:
    ident = prediction.identity
    model = "" if ident is None else f"{ident.backend} {ident.name} {ident.digest} "
    lines = [
        f"model: {model}({prediction.identity_source})",
        f"stages: {prediction.stages_from}; cache.mode {prediction.mode}",
    ]
    width = max((len(s.stage) for s in prediction.stages), default=10)
    pad = " " * (width + 7)  # under the reason: the name, a space, "runs ", a space
    for status in prediction.stages:
        lines.append(f"{status.stage:<{width}} {'runs' if status.runs else 'skip':<5} {status.why}")
        probe = status.probe
        if probe is None:
            continue
        lines.append(f"{pad}{_count(status, prediction.mode)}")
        if probe.stopped:
            lines.append(
                f"{pad}{len(probe.stopped)} item(s) stop at a call that needs a reply not known "
                f"yet, so later calls are not counted: {', '.join(probe.stopped)}"
            )
        if status.left_out:
            lines.append(
                f"{pad}{len(status.left_out)} item(s) not predictable, their input holds a reply "
                f"not known yet: {', '.join(status.left_out)}"
            )
        if verbose:
            lines += [f"{pad}new: {c.context.describe()} key {c.key}" for c in probe.model_calls]
    lines.append(summary_line(prediction))
    # Each is one line: a model name (the server's) or an item id cannot start another. A tab stays a
    # tab, as `diff` and `audit` show one (pipeline.llm.terminal.shown_line).
    return "\n".join(guarded(line, line=True) for line in lines) + "\n"


def as_json(prediction: Prediction) -> dict[str, Any]:
    stages = []
    for status in prediction.stages:
        entry: dict[str, Any] = {
            "stage": status.stage,
            "runs": status.runs,
            "why": status.why,
            "exact": status.exact,
        }
        probe = status.probe
        if probe is not None:
            entry |= {
                "calls": probe.calls,
                "recorded": probe.recorded,
                "local_only": probe.local_only,
                "repeats": probe.repeats,
                "model_calls": status.model_calls(prediction.mode),
                "stopped_items": probe.stopped,
                "unpredictable_items": status.left_out,
                "new_calls": [
                    {"context": c.context.model_dump(mode="json"), "key": c.key} for c in probe.model_calls
                ],
            }
        stages.append(entry)
    return {
        "identity": None if prediction.identity is None else prediction.identity.model_dump(mode="json"),
        "identity_source": prediction.identity_source,
        "cache_mode": prediction.mode,
        "stages_from": prediction.stages_from,
        "stages": stages,
        "model_calls": prediction.model_calls,
        "exact": prediction.exact,
        "offline_replay_ok": prediction.model_calls == 0 and prediction.exact,
        "summary": summary_line(prediction),
    }
