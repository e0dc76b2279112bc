"""The paper experiment's report: report.html (the index) and one page per item (html.py)."""
