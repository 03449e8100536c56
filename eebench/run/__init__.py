"""`eebench run`: configs and grids, execution, per-variant measurement, run-directory artifacts."""
