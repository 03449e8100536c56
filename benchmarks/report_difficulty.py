"""`python benchmarks/report.py --block difficulty` (see benchmarks/reports.py)."""
from report import alias

alias("difficulty")
