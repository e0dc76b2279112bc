"""`judgeloop audit`: the recorded calls, read back (command.py), and what changed between
iterations (diff.py)."""
