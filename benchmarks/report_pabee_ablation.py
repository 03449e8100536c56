"""`python benchmarks/report.py --block pabee-ablation` (see benchmarks/reports.py)."""
from report import alias

alias("pabee-ablation")
