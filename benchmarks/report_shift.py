"""`python benchmarks/report.py --block shift` (see benchmarks/reports.py)."""
from report import alias

alias("shift")
