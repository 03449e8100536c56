"""Wall time of the light commands: `eebench --help`, `eebench methods --json`, `backbones --json`.

    python benchmarks/cli_startup.py [--repeats 7] [--source DIR]

Each command runs in a fresh interpreter (`python -m eebench ...`), `--repeats` times; the median
and the minimum are printed, with the heavy libraries the command imported. `--source DIR` times
another checkout's package instead (e.g. an older commit in a git worktree), so two versions can be
compared side by side on one machine.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = (["--help"], ["methods", "--json"], ["backbones", "--json"])
HEAVY = ("torch", "transformers", "pandas", "matplotlib")
# The probe imports eebench from --source, not from wherever it is installed (an editable
# install's finder would otherwise win over the path).
PROBE = ("import runpy, sys\n"
         "sys.meta_path = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]\n"
         "sys.path.insert(0, {source!r})\n"
         "sys.argv = ['eebench', *sys.argv[1:]]\n"
         "try:\n    runpy.run_module('eebench', run_name='__main__')\n"
         "except SystemExit:\n    pass\n"
         "print('HEAVY', ','.join(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)\n"
         "print('FROM', sys.modules['eebench'].__file__, file=sys.stderr)\n")


def run(args: list[str], source: Path) -> tuple[float, str]:
    code = PROBE.format(heavy=HEAVY, source=str(source))
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                         check=True)
    seconds = time.perf_counter() - start
    *_, heavy, origin = out.stderr.strip().splitlines()
    assert origin.removeprefix("FROM ").startswith(str(source)), origin  # the version asked for
    return seconds, heavy.removeprefix("HEAVY").strip() or "none"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--source", type=Path, default=ROOT)
    args = parser.parse_args()
    print(f"{'command':28} {'median s':>9} {'min s':>7}  heavy imports")
    for cmd in COMMANDS:
        runs = [run(cmd, args.source) for _ in range(args.repeats)]
        times = [t for t, _ in runs]
        print(f"{'eebench ' + ' '.join(cmd):28} {statistics.median(times):9.2f} "
              f"{min(times):7.2f}  {runs[-1][1]}")


if __name__ == "__main__":
    main()
