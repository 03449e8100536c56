"""Where a grid's cells run: in this process (`local`), as Slurm job arrays, or as Ray tasks.

The engines (submitit, ray) are optional extras, imported only inside the functions that use them.
"""

from eebench.run.backends.cells import (
    Cell,
    CellOutcome,
    WorkerOptions,
    cells_of,
    execute_cell,
    run_cell,
    status,
)
from eebench.run.backends.driver import prepare, run_cells
from eebench.run.backends.engine import BACKENDS, BackendOptions, check_options, require_engine
from eebench.run.backends.plan import PlannedCell, plan

__all__ = ["BACKENDS", "BackendOptions", "Cell", "CellOutcome", "PlannedCell", "WorkerOptions",
           "cells_of", "check_options", "execute_cell", "plan", "prepare", "require_engine",
           "run_cell", "run_cells", "status"]
