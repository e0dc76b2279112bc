"""`judgeloop diff`: two runs judgement by judgement (command.py): which changed, why, and whether
the change exceeds noise."""
