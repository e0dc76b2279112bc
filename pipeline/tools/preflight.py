"""Before `judgeloop repro` starts DVC: is the server that the out-of-date stages will ask there?

Without this, a server that is down is found by the first stage's first call, which retries with
backoff (five lines over ten seconds), trips the breaker and names the fix, and the next stage
does it again. Here one connection per server is tried, at once, and a refusal stops the run only
for the designs whose LLM stages DVC finds out of date (a stage whose calls are all recorded runs
without a server, but an up-to-date stage does not run at all): one line, the server, the fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click
import httpx
import yaml

from pipeline.errors import JudgeloopError
from pipeline.experiments.registry import designs
from pipeline.llm.bounds import MAX_LINE_BYTES, check_yaml
from pipeline.llm.files import read_regular
from pipeline.llm.project_files import refuse_link_out
from pipeline.llm.settings import LLMSettings
from pipeline.tools import code_digests

REMOTE = ("ollama", "openai")  # the backends that talk to a server


def llm_stages(root: Path) -> set[str]:
    """dvc.yaml's stages that call a model (they depend on llm.backend)."""
    refuse_link_out(root / "dvc.yaml")  # read only from inside the project (pipeline.llm.project_files)
    try:
        text = read_regular(root / "dvc.yaml", MAX_LINE_BYTES).decode("utf-8")  # never a pipe or /dev/zero
        check_yaml(text)  # no alias bomb, no nesting past the composer's stack (pipeline.llm.bounds)
        stages = yaml.safe_load(text)["stages"]
    except (OSError, UnicodeDecodeError, yaml.YAMLError, KeyError, TypeError):
        return set()
    if not isinstance(stages, dict):
        return set()
    return {
        str(name)
        for name, spec in stages.items()
        if isinstance(spec, dict) and isinstance(spec.get("params"), list) and "llm.backend" in spec["params"]
    }


def urls(llm: LLMSettings) -> list[str]:
    return [server.base_url for server in llm.servers] or [llm.base_url]


def refused(url: str, timeout: float) -> str | None:
    """Why a connection to `url` cannot be made, or None when anything answers there."""
    try:
        httpx.get(url, timeout=timeout)
    except httpx.ConnectError as exc:
        return str(exc) or "connection refused"
    except httpx.HTTPError:
        return None  # it answered, or took its time: the calls' own retries deal with that
    return None


def stale_llm_stages(root: Path, targets: Sequence[str]) -> set[str]:
    from dvc.repo import Repo

    # `dvc repro TARGET` runs the stages TARGET needs too (`judgeloop repro rag_aggregate` runs
    # rag_judge where it is out of date): with_deps, as repro collects them.
    with Repo(str(root)) as repo:
        status = repo.status(targets=list(targets) or None, with_deps=True)
        changed = {name.rpartition(":")[2] for name in status}
        chain = {str(s.addressing) for t in targets for s in repo.stage.collect(t, with_deps=True)}
    # A stage depends on its code digest, which the code stage (upstream of every stage) rewrites
    # when a module the stage loads has changed: such a stage runs too.
    recoded = set(code_digests.pending(root))
    changed |= recoded & chain if targets else recoded
    return changed & llm_stages(root)


def _remote(design_name: str) -> LLMSettings | None:
    """The llm a design's stages use, when it is a server's and not replayed."""
    try:
        params = next(d for d in designs() if d.name == design_name).load_params()
    except JudgeloopError:
        return None  # the stage itself will say what is wrong
    llm: LLMSettings = params.llm
    return None if params.cache.mode == "replay" or llm.backend not in REMOTE else llm


def check_servers(targets: Sequence[str], root: Path = Path(".")) -> None:
    """A ClickException, one line, when a server an out-of-date LLM stage needs refuses connections.

    Every server a design asks is tried first (one connection each; a refusal is immediate), and
    only when one refuses is DVC asked which stages are out of date (`dvc status`: DVC's index
    and a hash of every dep, a third of a second at the paper's size before the run's own), to say
    whether a stage that will run needs it; when every server answers, none does."""
    remote = {d.name: llm for d in designs() if (llm := _remote(d.name)) is not None}
    if not remote:
        return
    probed: dict[str, str | None] = {}
    for llm in remote.values():
        for url in urls(llm):
            if url not in probed:
                probed[url] = refused(url, timeout=2.0)
    if all(why is None for why in probed.values()):
        return
    stale = stale_llm_stages(root, targets)
    for design in designs():
        llm = remote.get(design.name)
        if llm is None or not any(s.name in stale for s in design.stages):
            continue
        for url in urls(llm):
            why = probed[url]
            if why is not None:
                raise click.ClickException(
                    f"cannot connect to the {llm.backend} server at {url} ({why}), which design "
                    f"{design.name}'s out-of-date stages ask. Fix: start it (`ollama serve`), point "
                    "llm.base_url at it, or run from the recordings alone: `./judgeloop repro --replay`."
                )
