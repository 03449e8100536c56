"""eebench as a library: the few calls a notebook needs, and what the CLI itself calls.

    from eebench import api

    cfg = api.config(methods=["pabee"], tasks=["rte"], seeds=[1],
                     train={"max_train_samples": 200, "epochs": 1})
    done = api.run(cfg, data_dir="../shared/data")     # local; backend="slurm" or "ray" alike
    frame = api.results(done.run_dirs)                 # the results DataFrame
    report = api.score(done.run_dirs, reference="leaderboard/references/minilm-l6-static.json")
    print(report.elue)                                 # ELUE score by method and task
    api.plot(done.run_dirs, out="figures")
    sub = api.submission(done.run_dirs, data_dir="../shared/data")

A grid is a BenchConfig (eebench.run.config; `config` builds one from a TOML file and/or keyword
settings, validated as `eebench run --config` validates it). `run` expands it into validated runs
(every one checked before any work), groups them into cells (one trained model each) and runs the
cells on a backend: `local` (this process, one after another), `slurm` or `ray`; finished cells
are kept, so calling it again resumes. Pairs a method cannot run are skipped, each with its reason
(`RunResult.skipped`). Nothing here prints unless `say` is given; errors are EebenchErrors with
a one-line message.

Torch, transformers and pandas are imported inside the calls that need them.
"""

from eebench.api.grid import RunResult, check, config, expand, plan, run
from eebench.api.results import plot, reference, results, score, submission

__all__ = ["RunResult", "check", "config", "expand", "plan", "plot", "reference", "results",
           "run", "score", "submission"]
