"""`python benchmarks/report.py --block elue-minilm` (see benchmarks/reports.py)."""
from report import alias

alias("elue-minilm")
