"""`judgeloop cache`: stats, verify, gc, seed, export (command.py) and merge (merge.py) of the local
cache and the recordings."""
