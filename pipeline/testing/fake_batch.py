"""A stand-in for `vllm run-batch`: OpenAI Batch JSONL in, results out, answered as the fake
OpenAI-compatible server answers (pipeline.testing.fake_openai), with no server and no GPU.

    python -m pipeline.testing.fake_batch -i requests.jsonl -o results.jsonl --model test-model

Each output line has vLLM's shape: {"id", "custom_id", "response": {"status_code", "request_id",
"body"}, "error"}; a request the server would refuse gets its error body and status. --responder
picks the fake model: `default` (a digest of the request) or `experiment` (the paper experiment's
assessor and judge, pipeline.testing.judge_responder).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from pipeline.testing.fake_openai import BadRequest, FakeOpenAI, default_responder
from pipeline.testing.judge_responder import experiment_responder

RESPONDERS = {"default": default_responder, "experiment": experiment_responder}


def answer(server: FakeOpenAI, line: dict[str, object], number: int) -> dict[str, object]:
    body = line.get("body")
    request_id = f"fake-batch-{number}"
    try:
        if line.get("url") != "/v1/chat/completions" or not isinstance(body, dict):
            raise BadRequest(400, f"unsupported url {line.get('url')!r} or body")
        response = {"status_code": 200, "request_id": request_id, "body": server.complete(body)}
    except BadRequest as exc:
        error = {"error": {"message": str(exc), "type": exc.kind, "code": exc.code}}
        response = {"status_code": exc.code, "request_id": request_id, "body": error}
    return {"id": request_id, "custom_id": line.get("custom_id"), "response": response, "error": None}


@click.command()
@click.option("-i", "input_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option("-o", "output_file", type=click.Path(dir_okay=False, path_type=Path), required=True)
@click.option("--model", default="test-model", show_default=True)
@click.option("--responder", type=click.Choice(sorted(RESPONDERS)), default="experiment", show_default=True)
def main(input_file: Path, output_file: Path, model: str, responder: str) -> None:
    """Answer every request of INPUT_FILE into OUTPUT_FILE."""
    server = FakeOpenAI(models=(model,), responder=RESPONDERS[responder], max_model_len=65536)
    # One line at a time, as a batch runner of a million calls must: neither file is held whole.
    with input_file.open(encoding="utf-8") as lines, output_file.open("w", encoding="utf-8") as out:
        for number, line in enumerate((json.loads(raw) for raw in lines if raw.strip()), 1):
            out.write(json.dumps(answer(server, line, number)) + "\n")


if __name__ == "__main__":
    main()
