"""`judgeloop status`: the calls the next `dvc repro` needs (command.py), found by dry runs of the
stages (probe.py), predicted (prediction.py) and shown (report.py)."""
