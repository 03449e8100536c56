"""docs/results.md (and the MPNet cost table in docs/benchmarks.md) from the committed runs: the
report blocks declared in benchmarks/reports.py, built by eebench.reports.

    python benchmarks/report.py [--block NAME ...] [--check] [--no-write] [--export] ...

The benchmark's block also writes its reference curve, Pareto figures and submissions (each kept
byte for byte when its numbers are the same). Rerunning on the same runs gives the same page.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv: list[str] | None = None) -> int:
    from reports import BLOCKS

    from eebench.errors import EebenchError
    from eebench.reports import Context, generate

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--block", action="append", choices=[b.name for b in BLOCKS],
                    help="only this block (repeatable; default: all)")
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 if a document would change")
    ap.add_argument("--no-write", action="store_true", help="print the blocks; write nothing")
    ap.add_argument("--data-dir", type=Path, default=None, help="the GLUE/ELUE data (default: "
                    "$EEBENCH_DATA_DIR, else ../shared/data)")
    ap.add_argument("--export", action="store_true",
                    help="also write the ELUE test files of the test-split runs")
    ap.add_argument("--no-figures", action="store_true")
    args = ap.parse_args(argv)
    data_dir = args.data_dir or Path(os.environ.get("EEBENCH_DATA_DIR")
                                     or ROOT.parent / "shared" / "data")
    ctx = Context(root=ROOT, data_dir=data_dir, figures=not args.no_figures, export=args.export,
                  say=print if args.no_write else lambda line: print(line, file=sys.stderr))
    try:
        changed = generate(BLOCKS, ctx, args.block, check=args.check, show=args.no_write)
    except EebenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    names = ", ".join(str(p.relative_to(ROOT)) for p in changed) or "no document"
    if args.check:
        print(f"{names} would change" if changed else "up to date", file=sys.stderr)
    elif not args.no_write:
        print(f"wrote {names}", file=sys.stderr)
    return 1 if args.check and changed else 0


def alias(*blocks: str) -> None:
    """The former `report_*.py` commands: these blocks, with the options given."""
    sys.exit(main([f"--block={b}" for b in blocks] + sys.argv[1:]))


if __name__ == "__main__":
    sys.exit(main())
