"""`python benchmarks/report.py --block sweet-exits` (see benchmarks/reports.py)."""
from report import alias

alias("sweet-exits")
