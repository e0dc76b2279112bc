"""`judgeloop cache stats`: entries and bytes of the local store and the recordings, and the last
run of each stage, as text or JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from pipeline.experiments.params import Params, load_params
from pipeline.llm.cache.safe_disk import ForeignKey
from pipeline.llm.keys import KEY_PREFIX
from pipeline.llm.recordings import stage_folders, stage_reader
from pipeline.llm.terminal import echo
from pipeline.tools.cache.sizes import human
from pipeline.tools.inventory import open_store, read_runs, runs_dir


def _line_key(line: str) -> str | None:
    try:
        key = json.loads(line).get("key")
    except (ValueError, AttributeError, RecursionError):
        return None
    return key if isinstance(key, str) else None


def _local_stats(params: Params) -> dict[str, Any] | None:
    store = open_store(params)
    if store is None:
        return None
    entries = list(store.entries())
    # A key's prefix names its recipe: an entry under an older one is never looked up again.
    stale = sum(1 for key in entries if isinstance(key, str) and not key.startswith(KEY_PREFIX))
    local = {
        "entries": len(entries),
        "bytes": store.volume(),
        "older_key_recipe": stale,
        "refused": sum(isinstance(key, ForeignKey) for key in entries),
    }
    store.close()
    return local


def _recording_stats(params: Params) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for directory in stage_folders.stage_dirs(Path(params.cache.recordings)):
        lines = [line for _, line in stage_reader.split_recording(directory).calls]
        keys = {_line_key(line) for line in lines} - {None}
        size = sum(p.stat().st_size for p in directory.iterdir() if p.is_file())
        out[directory.name] = {"calls": len(lines), "unique_keys": len(keys), "bytes": size}
    return out


def _print_local(params: Params, local: dict[str, Any] | None) -> None:
    held = f"{local['entries']} entries, {human(local['bytes'])}" if local else "none yet (a run creates it)"
    echo(f"local cache {params.cache.dir}: {held}")
    if local and local["older_key_recipe"]:
        echo(
            f"  {local['older_key_recipe']} of them under an older key recipe, never looked up again "
            "(`judgeloop cache gc` removes them once no recording or last run names them)"
        )
    if local and local["refused"]:
        echo(
            f"  {local['refused']} of them with keys judgeloop never writes (pickled or not text): refused, "
            "never read (`judgeloop cache verify --repair` deletes them)"
        )


def _print_stats(params: Params, out: dict[str, Any]) -> None:
    _print_local(params, out["local"])
    echo(f"recordings {params.cache.recordings}/:" + ("" if out["recordings"] else " none"))
    for stage, rec in out["recordings"].items():
        echo(f"  {stage:<10} {rec['calls']} calls, {rec['unique_keys']} unique keys, {human(rec['bytes'])}")
    echo(f"last run per stage ({runs_dir(params)}):" + ("" if out["runs"] else " none on this machine"))
    for stage, run in out["runs"].items():
        misses = f", {run['replay_misses']} replay misses" if run["replay_misses"] else ""
        echo(
            f"  {stage:<10} mode {run['mode']}: {run['hits']} hits, {run['model_calls']} model calls{misses}"
        )


@click.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of text.")
def stats(as_json: bool) -> None:
    """Entries and bytes of the local cache and the recordings; hits and model calls of the last runs."""
    params = load_params()
    runs = {
        stage: {
            "mode": run.mode,
            "hits": run.hits,
            "model_calls": run.model_calls,
            "replay_misses": run.replay_misses,
        }
        for stage, run in read_runs(params).items()
    }
    out: dict[str, Any] = {
        "cache_dir": params.cache.dir,
        "local": _local_stats(params),
        "recordings": _recording_stats(params),
        "runs": runs,
    }
    if as_json:
        click.echo(json.dumps(out, indent=1, sort_keys=True))
    else:
        _print_stats(params, out)
