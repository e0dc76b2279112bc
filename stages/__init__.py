"""Where DVC calls in: every stage of dvc.yaml is `python -m stages DESIGN STAGE` (runner.py)."""
