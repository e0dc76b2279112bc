"""The `judgeloop` command (cli) and what it runs: audit, cache, status, report, calibrate."""
