"""`python benchmarks/report.py --block mpnet-slice --block mpnet-cost` (benchmarks/reports.py)."""
from report import alias

alias("mpnet-slice", "mpnet-cost")
