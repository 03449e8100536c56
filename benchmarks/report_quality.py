"""`python benchmarks/report.py --block quality` (see benchmarks/reports.py)."""
from report import alias

alias("quality")
