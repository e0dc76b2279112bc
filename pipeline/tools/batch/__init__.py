"""Batch rounds: the calls the next `dvc repro` needs, made by a batch job instead of a server.

    judgeloop batch export            the calls the cache lacks, as OpenAI Batch JSONL (exchange.py)
    judgeloop batch ingest RESULTS    the job's results, verified, into the cache (exchange.py)
    judgeloop batch run               export -> runner -> ingest, round after round, then `dvc repro`
                                      from the cache alone (rounds.py; runners.py: a command
                                      template such as `vllm run-batch`, or Ray Data)

The calls are the ones `judgeloop status` predicts (pipeline.tools.status): its planner dry-runs
every stage against the cache, so each round exports exactly the calls whose requests are known,
and a loop (which asks again with the model's last reply) takes a round per step.
"""
