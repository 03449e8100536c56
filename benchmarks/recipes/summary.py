"""The recipe search's table: each finished run's full-model dev score by task, learning rate and
epochs, the best recipe of each task marked.

    python benchmarks/recipes/summary.py benchmarks/results/recipes-minilm
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def recipes(root: Path) -> list[tuple[str, float, int, float]]:
    """(task, lr, epochs, full-model dev main metric) of every finished run under `root`."""
    rows = []
    for summary in sorted(root.glob("*/*/*/*/summary.json")):
        config = json.loads((summary.parent / "config.json").read_text())
        train = config["train"]
        main = json.loads(summary.read_text())["full_model"]["main"]
        rows.append((config["task"], train.get("lr"), train.get("epochs", 3), main))
    return sorted(rows)


def main(root: str) -> None:
    rows = recipes(Path(root))
    best = {}
    for task, lr, epochs, score in rows:
        if score > best.get(task, (float("-inf"),))[0]:
            best[task] = (score, lr, epochs)
    for task, lr, epochs, score in rows:
        mark = "  <- chosen" if best[task][1:] == (lr, epochs) else ""
        print(f"{task:13} lr {lr:<6g} epochs {epochs}  dev {score:6.2f}{mark}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results/recipes-minilm")
