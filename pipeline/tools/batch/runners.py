"""What answers a batch round: a file of requests in, a file of results out (OpenAI Batch JSONL).

    CommandRunner   a command template, run by the shell with {in}, {out} and {model} filled in
                    (shell-quoted), e.g. vLLM's offline batch runner:
                        vllm run-batch -i {in} -o {out} --model {model}
                    or a script that uploads the file to a provider's batch API and waits.
    RayRunner       Ray Data: ray.data.llm's HTTP request processor (HttpRequestProcessorConfig)
                    sends each request to an OpenAI-compatible endpoint (vLLM servers behind a
                    load balancer, a Ray Serve deployment), `concurrency` at a time, from workers on
                    the Ray cluster that RAY_ADDRESS names (a local one without it).

ray.data.llm imports with `ray[data]` alone (judgeloop's `ray` extra: pip install judgeloop[ray]);
its HTTP processor needs no vLLM. On a GPU cluster, the same requests file can be answered by
vLLM inside Ray (ray.data.llm's vLLMEngineProcessorConfig, which needs `ray[llm]` and vLLM): it
is not wired in here, since its replies would be those of an engine judgeloop does not call and
cannot check against a server's identity; run it through CommandRunner with your own script
(read {in}, write {out} in this format) and pin llm.digest to the checkpoint it loads.

The HTTP processor sends a batch's rows one after another, so each request is a batch of its own
(batch_size 1) and `concurrency` actors send that many at once; one row a batch also keeps each
request's body apart from the others' on its way through Ray's Arrow blocks, so it reaches the
server exactly as exported (a test compares what the server received).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import orjson

from pipeline.errors import BackendError, ConfigError
from pipeline.llm.backends.http_errors import body_error
from pipeline.llm.backends.openai_compat import api_root
from pipeline.llm.bounds import surrogate_problem
from pipeline.llm.files import atomic_write
from pipeline.tools.batch.manifest import BATCH_URL, replacing


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
            import ray  # noqa: F401
            from ray.data.llm import HttpRequestProcessorConfig  # noqa: F401
        except ImportError as exc:
            raise ConfigError(
                f"the Ray runner needs Ray Data ({exc}). Fix: pip install 'judgeloop[ray]' (ray[data])."
            ) from exc
        self.url = api_root(endpoint) + BATCH_URL
        self.concurrency, self.num_cpus = concurrency, num_cpus
        key = os.environ.get(api_key_env) if api_key_env else None
        self.headers = {"Authorization": f"Bearer {key}"} if key else None
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
        from ray.data.llm import HttpRequestProcessorConfig, build_processor

        self._connect()
        if not any(line.strip() for line in _lines(requests)):
            atomic_write(results, "")
            return
        config = HttpRequestProcessorConfig(
            url=self.url,
            headers=self.headers,
            concurrency=self.concurrency,
            batch_size=1,
            max_retries=3,
            http_request_stage={"num_cpus": 0.1},
        )
        processor = build_processor(
            config,
            preprocess=_payload,
            postprocess=lambda row: {
                "custom_id": row["custom_id"],
                "response": json.dumps(row["http_response"]),
            },
        )
        # Streamed both ways (issue 33): Ray reads requests.jsonl in blocks, and the answers are
        # written as they come, so neither file is ever whole in this process's memory.
        lines = ray.data.read_text(str(requests.resolve()))  # the workers have cwds of their own
        dataset = lines.filter(lambda row: bool(row["text"].strip()))
        with replacing(results) as out:
            for row in processor(dataset).iter_rows():
                out.write(batch_line(row["custom_id"], json.loads(row["response"])).encode())

    def close(self) -> None:
        if self._started:
            import ray

            ray.shutdown()


def _lines(path: Path) -> Iterator[bytes]:
    with path.open("rb") as handle:
        yield from handle


def _payload(row: dict[str, Any]) -> dict[str, Any]:
    """A line of requests.jsonl as the processor's row: its custom_id and the body to POST."""
    entry = orjson.loads(row["text"])
    return {"custom_id": entry["custom_id"], "payload": entry["body"]}


def batch_line(custom_id: str, body: Any) -> str:
    """One line of OpenAI Batch output for a reply's body: an error body as the line's error, and so
    a body holding a lone surrogate (the json module reads one from an escape; no line can hold it):
    a failed call, which ingest reports and stores nowhere."""
    half = surrogate_problem(body)
    said = f"the reply holds {half}: a failed call, not an answer" if half is not None else body_error(body)
    if said is not None:
        line: dict[str, Any] = {"custom_id": custom_id, "response": None, "error": {"message": said}}
    else:
        line = {"custom_id": custom_id, "response": {"status_code": 200, "body": body}, "error": None}
    return orjson.dumps(line).decode() + "\n"
