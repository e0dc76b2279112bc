"""`judgeloop cache`: the group (command.py) and one module per command: stats, verify, gc, merge
(merge_command.py over merge.py), seed, export."""
