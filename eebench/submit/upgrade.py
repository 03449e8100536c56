"""The one function that reads what earlier versions of the submission format wrote: a file's
JSON in today's schema (eebench.submit.validate.parse_submission calls it on every file).

Version 2 wrote a point's sweep value as one number, `sweep_value`, named by the method's
`sweep_param` (PCEE's pair packed as patience + threshold: 2.3), and declared a cascade's model
depths as `chained_models`; every other run was one model, which version 2 did not describe
beyond its depth: read as a head after each of its layers, as version 2's checks bounded it.
A file that is not laid out as its version says is left as it is, for the schema to refuse in
one line.
"""

from __future__ import annotations

import math
from typing import Any

from eebench.run.upgrade import exit_paths, named_values


def upgrade(data: Any) -> Any:
    """A submission's JSON in today's schema (version 3), from version 2; anything else as is."""
    if not isinstance(data, dict) or data.get("schema_version") != 2 or isinstance(
            data.get("schema_version"), bool):
        return data
    method, tasks = data.get("method"), data.get("tasks")
    if not isinstance(method, dict) or not isinstance(tasks, dict):
        return data
    param = str(method.get("sweep_param"))
    out_tasks = {}
    for name, task in tasks.items():
        if not isinstance(task, dict) or not isinstance(task.get("runs"), list):
            return data
        layers = task.get("num_layers")
        runs = []
        for run in task["runs"]:
            if not isinstance(run, dict) or not isinstance(run.get("points"), list) or not all(
                    isinstance(p, dict) for p in run["points"]):
                return data
            run = dict(run)
            chained = run.pop("chained_models", None)
            depths = chained if chained is not None else list(range(1, _int(layers) + 1))
            if not isinstance(depths, list) or not all(_int(k) == k for k in depths):
                return data
            run["exit_paths"] = exit_paths(depths, chained is not None)
            run["points"] = [_point(p, param) for p in run["points"]]
            runs.append(run)
        out_tasks[name] = {**task, "runs": runs}
    return {**data, "schema_version": 3, "tasks": out_tasks}


def _point(p: dict, param: str) -> dict:
    value = p.get("sweep_value")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return p  # the schema names what is wrong
    rest = {k: v for k, v in p.items() if k != "sweep_value"}
    return {"sweep": named_values(param, value), **rest}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and \
        0 < value <= 256 else 0
