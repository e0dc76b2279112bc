"""What answers a batch round: a file of requests in, a file of results out (OpenAI Batch JSONL).

    CommandRunner   a command template, run by the shell with {in}, {out} and {model} filled in
                    (shell-quoted), e.g. vLLM's offline batch runner:
                        vllm run-batch -i {in} -o {out} --model {model}
                    or a script that uploads the file to a provider's batch API and waits.
    RayRunner       Ray Data: workers on the Ray cluster that RAY_ADDRESS names (a local one
                    without it) read stretches of the requests file and send each request to an
                    OpenAI-compatible endpoint (vLLM servers behind a load balancer, a Ray Serve
                    deployment), `concurrency` at a time in all (pipeline.tools.batch.ray_sender).

The Ray runner needs `ray[data]` alone (judgeloop's `ray` extra: pip install judgeloop[ray]), no
vLLM. On a GPU cluster, the same requests file can be answered by vLLM inside Ray (ray.data.llm's
vLLMEngineProcessorConfig, which needs `ray[llm]` and vLLM): it is not wired in here, since its
replies would be those of an engine judgeloop does not call and cannot check against a server's
identity; run it through CommandRunner with your own script (read {in}, write {out} in this
format) and pin llm.digest to the checkpoint it loads.

Each request reaches the server with its body exactly as exported (a test compares what the server
received), and the same reply makes the same results line as before the runner was rewritten
(issue 33: ray.data.llm's HTTP processor sent one request at a time a worker, 12 calls/s).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path
from typing import Any, Protocol

import orjson

from pipeline.errors import BackendError, ConfigError
from pipeline.llm.backends.http_errors import body_error
from pipeline.llm.backends.openai_compat import api_root
from pipeline.llm.bounds import LineTooLong, bounded_lines, surrogate_problem
from pipeline.llm.files import atomic_write, replacing
from pipeline.tools.batch.manifest import BATCH_URL


class Runner(Protocol):
    """Answers every line of a requests file into a results file."""

    def run(self, requests: Path, results: Path) -> None: ...

    def close(self) -> None: ...


class CommandRunner:
    def __init__(self, template: str, model: str) -> None:
        missing = [p for p in ("{in}", "{out}") if p not in template]
        if missing:
            raise ConfigError(
                f"the runner command {template!r} lacks {' and '.join(missing)}. Fix: write the requests "
                "file as {in} and the results file as {out}, e.g. `vllm run-batch -i {in} -o {out} "
                "--model {model}`."
            )
        self.template, self.model = template, model

    def command(self, requests: Path, results: Path) -> str:
        filled = {"{in}": str(requests), "{out}": str(results), "{model}": self.model}
        command = self.template
        for placeholder, value in filled.items():
            command = command.replace(placeholder, shlex.quote(value))
        return command

    def run(self, requests: Path, results: Path) -> None:
        command = self.command(requests, results)
        results.unlink(missing_ok=True)
        done = subprocess.run(command, shell=True, check=False)
        if done.returncode != 0:
            raise BackendError(f"the runner command failed (exit {done.returncode}): {command}")
        if not results.is_file():
            raise BackendError(f"the runner command wrote no results file at {results}: {command}")

    def close(self) -> None:
        pass


class RayRunner:
    def __init__(
        self,
        endpoint: str,
        *,
        concurrency: int = 4,
        api_key_env: str | None = None,
        num_cpus: int | None = None,
    ) -> None:
        try:
            import ray.data  # noqa: F401
        except ImportError as exc:
            raise ConfigError(
                f"the Ray runner needs Ray Data ({exc}). Fix: pip install 'judgeloop[ray]' (ray[data])."
            ) from exc
        self.url = api_root(endpoint) + BATCH_URL
        self.concurrency, self.num_cpus = max(1, concurrency), num_cpus
        key = os.environ.get(api_key_env) if api_key_env else None
        self.headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._started = False

    def _connect(self) -> None:
        import ray

        if ray.is_initialized():
            return
        if os.environ.get("RAY_ADDRESS"):  # the cluster it names: its resources are its own
            ray.init(log_to_driver=False)
        else:  # a Ray of this machine's, for this run
            ray.init(num_cpus=self.num_cpus, include_dashboard=False, log_to_driver=False)
        self._started = True

    def run(self, requests: Path, results: Path) -> None:
        import ray
        import ray.data

        from pipeline.tools.batch.ray_sender import RequestSender, stretches

        self._connect()
        if not _has_requests(requests):
            atomic_write(results, "")
            return
        # `concurrency` requests out at once in all, PER_WORKER at most from one worker (its
        # threads share one GIL); a worker asks a quarter of a CPU, as it mostly waits.
        workers = -(-self.concurrency // PER_WORKER)
        path = str(requests.resolve())  # the workers have cwds of their own
        ranges = stretches(requests, workers)
        dataset = ray.data.from_items([{"start": s, "end": e} for s, e in ranges]).map_batches(
            RequestSender,
            batch_size=1,
            concurrency=min(workers, len(ranges)),
            num_cpus=0.25,
            fn_constructor_kwargs={
                "path": path,
                "url": self.url,
                "headers": self.headers,
                "in_flight": -(-self.concurrency // workers),
                "max_retries": 3,
                "retry_wait_s": 1.0,
                "timeout_s": 600.0,
            },
        )
        # Streamed both ways (issue 33): each worker reads its stretch of requests.jsonl line by
        # line, and the answers are written as they come, so neither file is ever whole in memory.
        try:
            with replacing(results) as out:
                for row in dataset.iter_rows():
                    out.write(answer_line(row).encode())
        except ray.exceptions.RayError as exc:
            raise BackendError(f"the Ray runner failed on {requests}: {exc}") from exc

    def close(self) -> None:
        if self._started:
            import ray

            ray.shutdown()


PER_WORKER = 16


def answer_line(row: dict[str, Any]) -> str:
    """A worker's answer (pipeline.tools.batch.ray_sender) as a results line: the reply's body
    read by the json module (as the HTTP processor's client read it), so that the same reply
    makes the same line; no reply, a reply that is not JSON, or a status other than 200 with no
    error in its body, a failed call."""
    key = row["custom_id"]
    if row["problem"]:
        return failed_line(key, row["problem"])
    try:
        body = json.loads(row["reply"])
    except (ValueError, RecursionError):  # nested past the json module's depth: not JSON to us either
        return failed_line(key, f"HTTP {row['status']}: the reply is not JSON: {row['reply'][:200]!r}")
    if row["status"] != "200" and body_error(body) is None:
        return failed_line(key, f"HTTP {row['status']}: {row['reply'][:200]!r}")
    return batch_line(key, body)


def _has_requests(path: Path) -> bool:
    """Whether requests.jsonl holds a line that is not blank: read through one descriptor of a
    regular file, line by line within the bound (pipeline.llm.bounds), so that a pipe put there is
    refused, naming it, not waited on."""
    try:
        return any(raw.strip() for _, raw in bounded_lines(path))
    except LineTooLong:
        return True  # a line, past the bound: the workers meet it and say so
    except OSError as exc:  # not a file (a pipe, a folder), or not ours to read
        fix = "Fix: export again (judgeloop batch export)."
        raise ConfigError(f"{path}: cannot be read ({exc}). {fix}") from None


def batch_line(custom_id: str, body: Any) -> str:
    """One line of OpenAI Batch output for a reply's body: an error body as the line's error, and so
    a body holding a lone surrogate (the json module reads one from an escape; no line can hold it):
    a failed call, which ingest reports and stores nowhere."""
    half = surrogate_problem(body)
    said = f"the reply holds {half}: a failed call, not an answer" if half is not None else body_error(body)
    if said is not None:
        return failed_line(custom_id, said)
    line = {"custom_id": custom_id, "response": {"status_code": 200, "body": body}, "error": None}
    try:
        return orjson.dumps(line).decode() + "\n"
    except orjson.JSONEncodeError as exc:  # read, but no line holds it: past 64 bits, 255 levels
        return failed_line(custom_id, f"the reply cannot be written as a results line ({exc}): a failed call")


def failed_line(custom_id: str, message: str) -> str:
    """A results line for a call that got no answer: ingest reports it, and the next round asks again."""
    line = {"custom_id": custom_id, "response": None, "error": {"message": message}}
    return orjson.dumps(line).decode() + "\n"
