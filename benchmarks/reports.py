"""The report blocks of docs/results.md (and of docs/benchmarks.md), declared: which runs, which
kind of tables, which text, where. `python benchmarks/report.py` builds them
(eebench.reports); a block's kind, a name in eebench.reports.KINDS, is the code that turns its
runs into the values of its text. Paragraphs of a text are unwrapped on the page; each {name} is
a value the kind fills in.
"""

from __future__ import annotations

from pathlib import Path

from eebench.reports import Block, Runs

RESULTS = "benchmarks/results"
MINILM = Runs(folder=f"{RESULTS}/elue-minilm")
REFERENCE = "leaderboard/references/minilm-l6-static.json"
CLASSIC = ["static", "deebert", "pabee"]  # on every task of the config
# the field's other methods, on these tasks (benchmarks/elue_minilm.sh)
FIELD = ["maxprob", "fastbert", "pcee", "elasticbert", "sweet", "berxit", "cascade"]

ELUE_PAGE = """\
Built by `python benchmarks/report_elue_minilm.py` from **{n_runs} of {n_jobs} runs** of
`benchmarks/elue-minilm.toml`{pending} (`benchmarks/results/elue-minilm/`, one directory per
method, task and seed, each with its config, points, per-sample predictions and summary).
Hardware: {hardware}, one thread per run, two runs at a time.

## Budget

MiniLM-L6 (all-MiniLM-L6-v2, 6 layers, hidden 384), mean-pooled exit heads, lr {lr:g}, batch
{batch_size}, {precision} autocast, length-grouped batches, seeds {seeds}. Training examples are
a seeded subset of the training split; scores are on the dev split (the labelled test sets are
withheld).

{budget}

## ELUE scores

Mean over a method's operating points of (its metric − the reference curve at its FLOPs), in
points; the reference is the static first-k-layer models of these very runs
(`leaderboard/references/minilm-l6-static.json`, seed-averaged), so static scores 0 by
construction. Curve held flat outside its FLOPs range (`clamp`). With more than one seed, ± is
the standard deviation of the score of each seed's points on their own; static's spread around 0
is the noise floor.

{elue}

## Full model, best point, ensemble

The full model is static k = 6. *Best* is a method's best seed-averaged point (at its MFLOPs).
The ensemble averages every exit's class probabilities (regression: outputs) on every sample: the
upper bound of a multi-exit model that never exits early.

{summary}

## Significance (paired bootstrap)

Per task, A − B in per-sample accuracy (not the main metric where that is MCC or F1-based) over
the dev samples, each point of A paired with the point of B nearest in FLOPs and the pairs
pooled; seeds averaged per sample. {n_resamples} resamples, 95% percentile interval, two-sided p.
For regression the statistic is the squared error (lower is better).

{significance}

PABEE's best point (by the main metric) against the full model (static k = 6), paired; the
difference is in per-sample accuracy (squared error for STS-B), which for CoLA (MCC) and MRPC
(mean of accuracy and F1) is not the main metric:

{pabee}

## Every rule on every model

The ELUE score of each exit rule swept on each training scheme's models (`eebench run --rule`:
one pass over each model serves its own rule and the others), per task, ± over seeds, against
the same reference. A row is how the models were trained, a column how they exit.

{rules}

## Per task

Every operating point, seed-averaged. *speed-up*: full-model MFLOPs ÷ the point's; *latency*:
real dynamic inference at batch size 1 on the CPU above, median per sample (timed on the first
100 dev samples, so it is noisier than the FLOPs); *vs reference*: metric minus the reference
curve at the point's FLOPs; ●: on the task's Pareto front over all methods.

{tasks}"""


ELUE_TASK = """\
### {title} ({split}, {metric}, {seeds})

![{title}: {metric} against MFLOPs per sample](figures/results/{task}-pareto.png)

{table}

ELUE score (mean of *vs reference* over a method's points): {scores}."""


ABLATION_TASK = "**{title}** ({metric})\n\n{table}"

MPNET = f"{RESULTS}/mpnet-recipes"
# the 12-layer model on RTE and CoLA for the claims made there (static k = 12, DeeBERT, PABEE)
MPNET_CLAIMS = f"{RESULTS}/mpnet-claims"
MPNET_PAGE = """\
Built by `python benchmarks/report.py --block elue-mpnet` from **{n_runs} of {n_jobs} runs** of
`benchmarks/mpnet-recipes.toml` (`bash benchmarks/mpnet_recipes.sh`: every method on seed 1;
static, DeeBERT and PABEE on seeds 2 and 3 too){pending}. Hardware: {hardware}, one thread per
run, two runs at a time.

## Budget

MPNet-base (all-mpnet-base-v2, 12 layers, hidden 768, 109M parameters), mean-pooled exit heads,
batch {batch_size}, {precision} autocast, length-grouped
batches, every training example (SciTail: 8,000 of its 23,596 pairs), the learning rate the
recipe search chose per task (`benchmarks/recipes/mpnet-base.toml`), 3 epochs. Scores are on the
dev split; the labelled test sets are withheld (the seed-1 test-split runs in
`benchmarks/results/mpnet-recipes-test/` are for `eebench export-elue`).

{budget}

## ELUE scores

Mean over a method's operating points of (its metric - the reference curve at its FLOPs), in
points, against the static first-k-layer models of these runs
(`leaderboard/references/mpnet-base-static.json`, seed-averaged; clamped outside its range). ±:
the standard deviation of each seed's own score, where a method has more than one seed.

{elue}

## Full model, best point, ensemble

The full model is static k = 12. *Best* is a method's best seed-averaged point (at its MFLOPs);
the ensemble averages every exit's probabilities on every sample.

{summary}

## Significance (paired bootstrap)

{n_resamples} resamples; per task, A - B in per-sample accuracy (squared error for STS-B) over
the dev samples, each point of A paired with the point of B nearest in FLOPs.

{significance}

{pabee}

## Per task

Every operating point, seed-averaged; *speed-up* over the full model's MFLOPs; latency: real
dynamic inference at batch size 1 on the CPU above (the first 100 dev samples).

{tasks}"""

MPNET_TASK = """\
### {title} ({split}, {metric}, {seeds})

![{title}: {metric} against MFLOPs per sample](figures/results-mpnet/{task}-pareto.png)

{table}

ELUE score (mean of *vs reference* over a method's points): {scores}."""


def _has_runs(folder: str) -> bool:
    """A block whose page needs finished runs is declared once the first is in."""
    return any((Path(__file__).resolve().parent.parent / folder).rglob("summary.json"))


# The 12-layer curves come from the 12-layer benchmark once its static runs of ELUE SST-2 are in,
# from the 12-layer slice until then.
TWELVE = _has_runs(f"{MPNET}/mpnet-base/static/elue-sst2")
TWELVE_SAID = ("the 12-layer benchmark (`benchmarks/mpnet-recipes.toml`: MPNet-base, every "
               "training example, a recipe per task)") if TWELVE else (
    "the 12-layer slice (`benchmarks/elue-mpnet.toml`: MPNet-base, 2,000 training examples, "
    "2 epochs, seed 1) until the 12-layer benchmark is in")


BLOCKS = [
    Block(name="elue-minilm", kind="elue-benchmark", marker="generated",
          runs={"main": MINILM, "rules": Runs(folder=f"{RESULTS}/elue-minilm-rules"),
                "test": Runs(folder=f"{RESULTS}/elue-minilm-test")},
          text={"body": ELUE_PAGE, "task": ELUE_TASK,
                "rules": "From {n:~run} in `benchmarks/results/elue-minilm-rules/`.\n\n{table}",
                "no_rules": "(no rule runs yet: benchmarks/elue_minilm.sh runs them)"},
          options={"config": "benchmarks/elue-minilm.toml", "reference": REFERENCE,
                   "reference_name": "minilm-l6-static", "figures": "docs/figures/results",
                   "submissions": "leaderboard/submissions",
                   "submission_file": "minilm-l6-{method}.json",
                   "submission_name": "MiniLM-L6 {method} (CPU)",
                   "export": f"{RESULTS}/elue-export",
                   "classic": CLASSIC, "field": FIELD,
                   "field_tasks": ["sst2", "elue-mrpc", "elue-scitail"],
                   "pairs": [["pabee", "static"], ["deebert", "static"], ["pabee", "deebert"],
                             *([m, "deebert"] for m in FIELD)],
                   "n_resamples": 2000,
                   # how a point's setting reads, by the rule it was swept with
                   "setting": {"entropy": "entropy <", "normalized-entropy": "H/ln C <",
                               "maxprob": "max p ≥", "calibrated-maxprob": "max p(z/T) ≥",
                               "learned": "exit score <", "patience": "patience"},
                   "schemes": ["deebert", "pabee", "elasticbert"],
                   "rules": ["entropy", "maxprob", "patience"]}),
    *([Block(name="elue-mpnet", kind="elue-benchmark", marker="elue-mpnet",
                doc="docs/results-mpnet.md",
                runs={"main": Runs(folder=MPNET), "rules": Runs(folder=f"{MPNET}-rules"),
                      "test": Runs(folder=f"{MPNET}-test")},
                text={"body": MPNET_PAGE, "task": MPNET_TASK, "rules": "{table}", "no_rules": ""},
                options={"config": "benchmarks/mpnet-recipes.toml",
                         "reference": "leaderboard/references/mpnet-base-static.json",
                         "reference_name": "mpnet-base-static",
                         "figures": "docs/figures/results-mpnet",
                         "submissions": "leaderboard/submissions",
                         "submission_file": "mpnet-base-{method}.json",
                         "submission_name": "MPNet-base {method} (CPU)",
                         "export": f"{RESULTS}/elue-export-mpnet12",
                         "classic": CLASSIC, "field": FIELD,
                         "field_tasks": ["elue-sst2", "elue-mrpc", "elue-stsb", "elue-scitail"],
                         "field_seeds": [1],
                         "pairs": [["pabee", "static"], ["deebert", "static"],
                                   ["pabee", "deebert"]],
                         "n_resamples": 2000,
                         "setting": {"entropy": "entropy <", "normalized-entropy": "H/ln C <",
                                     "maxprob": "max p ≥", "calibrated-maxprob": "max p(z/T) ≥",
                                     "learned": "exit score <", "patience": "patience"},
                         "schemes": [], "rules": []})]
      if _has_runs(f"{MPNET}/mpnet-base/static") else []),  # once a reference curve is in
    Block(name="pabee-ablation", kind="ablation", marker="pabee-ablation",
          runs={"variants": Runs(folder=f"{RESULTS}/pabee-ablation", methods=("pabee",)),
                "baseline": MINILM.model_copy(update={"methods": ("pabee", "static")})},
          text={"task": ABLATION_TASK, "body": """\
Built by `python benchmarks/report_pabee_ablation.py` from {n_baseline} + {n_variants} runs
(seeds {seeds}; the benchmark's budget above). Each exit's dev metric on all samples, mean ± std
over seeds; the ELUE score of the sweep against the shipped static reference (static's own: its
seeds' spread around the seed-averaged curve).

{tasks}"""},
          options={"reference": REFERENCE, "name_by": "settings", "row_header": "training",
                   "paper": {"loss_weights": "layer", "shared_pooler": True},
                   "paper_name": "paper (j-weighted loss, shared pooler)",
                   "static_name": "static: exit k is a separate k-layer model",
                   "first": ["static: exit k is a separate k-layer model",
                             "paper (j-weighted loss, shared pooler)"],
                   "column": "exit {j}"}),
    Block(name="sweet-exits", kind="ablation", marker="sweet-exits",
          runs={"variants": Runs(folder=f"{RESULTS}/sweet-exits", methods=("sweet",)),
                "baseline": MINILM.model_copy(update={"methods": ("sweet",)})},
          text={"task": ABLATION_TASK, "body": """\
Built by `python benchmarks/report_sweet_exits.py` from {n_baseline} + {n_variants} runs (seeds
{seeds}; the benchmark's budget above). Each exit's dev metric on all samples (by the layer it
follows), mean ± std over seeds; the ELUE score of the threshold sweep against the shipped static
reference.

{tasks}"""},
          options={"reference": REFERENCE, "name_by": "exit_layers", "row_header": "exits",
                   "every_layer_name": "after every layer", "first": ["after every layer"],
                   "column": "layer {k}"}),
    Block(name="quality", kind="quality", marker="quality", runs={"main": MINILM},
          options={"half": 50.0}, text={"body": """\
Built by `python benchmarks/report_quality.py` from the {n_runs:~committed run} above (seeds
{seeds}), computed from their stored per-sample arrays; every cell is the mean ± std over seeds.
Definitions: [scoring.md](scoring.md#quality-of-the-exited-predictions). Parameters (ELUE's
buckets): {buckets}.

**Quality at half the FLOPs.** Per task and method, the seed-averaged operating point with the
best main metric among those costing at most {half}% of the full model's FLOPs, and the full
model (static k = 6) itself. ECE in percent (15 equal-width bins of max softmax probability,
weighted by bin size), NLL in nats; consistency, gain and loss against the method's own
full-depth prediction (joint methods: their last exit; static: its k = 6 model). STS-B
(regression) has none of these.

{half_table}

**Each exit on its own, and overthinking** (per run: every sample leaving at that exit; static:
the k-layer model). Overthinking: samples some earlier exit gets right and the last exit gets
wrong; underthinking, its mirror: some earlier exit wrong, the last right.

{exits_table}

**Fixed budgets.** The main metric at {budgets}% of the full model's FLOPs: per seed the best
operating point within the budget (a step along the method's own Pareto front, no interpolation
between points), then mean ± std over seeds; `-`: some seed has no point that cheap.

{budgets_table}"""}),
    Block(name="difficulty", kind="difficulty", marker="difficulty",
          runs={"main": MINILM.model_copy(update={"seeds": (1,)})},
          options={"tasks": ["sst2", "elue-sst2", "elue-scitail"], "methods": ["deebert", "pabee"],
                   "consistency": 0.95, "delta": 0.05, "split_seed": 0,
                   "examples": ["deebert", "sst2", 3]},
          text={"examples": """\
**Easiest and hardest {title} dev sentences** ({method}, {setting}):

{table}""", "body": """\
Built by `python benchmarks/report_difficulty.py` from the DeeBERT and PABEE runs of seed {seed}
(`eebench analyze RUN` and `eebench select RUN --consistency {consistency} --delta {delta} --seed
{split_seed}` on each).

**Spearman's ρ with the exit layer** at the point nearest half the full model's FLOPs (p < 0.001
unless given):

{rho_table}

**Selected thresholds**: consistency with the full model ≥ {consistency} with confidence
{confidence}, chosen on a calibration half, realised on the other half:

{select_table}{examples}"""}),
    Block(name="mpnet-slice", kind="static-curves", marker="mpnet-slice",
          heading="## A 12-layer slice: MPNet-base against MiniLM-L6",
          runs={"main": Runs(folder=f"{RESULTS}/elue-mpnet"), "other": MINILM,
                "test": Runs(folder=f"{RESULTS}/elue-mpnet-test")},
          options={"models": {"main": "MPNet-base", "other": "MiniLM-L6"},
                   "methods": ["deebert", "pabee"], "export": f"{RESULTS}/elue-export-mpnet"},
          text={"none": "No finished static run yet.",
                "task": "**{title}: the static curve (first k layers, dev)**\n\n{table}",
                "elue": "**ELUE score against each model's own static curve (points, dev)**"
                        "\n\n{table}",
                "body": """\
Built by `python benchmarks/report_elue_mpnet.py` from {n_runs:~MPNet-base run} of
`benchmarks/elue-mpnet.toml` (one seed, 2,000 training examples, 2 epochs, lr 5e-5, bf16, 64
tokens for ELUE SST-2 and 128 for SciTail) and the MiniLM-L6 benchmark's runs of the same tasks
(three seeds; 2,500 and 2,000 training examples). CPU only.

{tables}"""}),
    Block(name="mpnet-cost", kind="run-cost", marker="mpnet-cost", doc="docs/benchmarks.md",
          runs={"main": Runs(folder=f"{RESULTS}/elue-mpnet")},
          text={"body": "{table}", "none": "No finished run yet."},
          heading="## The cost of a 12-layer benchmark on a CPU: MPNet-base runs\n\nWall time "
                  "of each run of `benchmarks/elue-mpnet.toml` (training, the one-pass sweep, "
                  "FLOPs and timing included), one worker process with one thread on a 2-core "
                  "machine, as its `summary.json` records it."),
    Block(name="recipes-cost", kind="run-cost", marker="recipes-cost", doc="docs/benchmarks.md",
          runs={"main": Runs(folder=f"{RESULTS}/recipes-minilm")}, options={"recipe": True},
          text={"none": "No finished run yet.", "body": """\
**MiniLM-L6 recipe search** (`bash benchmarks/recipes/search_minilm.sh`, fp32): {total} hours
of one core in all ({counted}; these runs predate the record of training time, and a run
resumed after an interruption counts only what was left, so this is a lower bound).

{table}"""},
          heading="## What the recipe runs cost on a CPU\n\nWall time of each run as its "
                  "`summary.json` records it (training, the sweep, FLOPs and timing included), "
                  "one worker process with one thread, two at a time on the 2-core AMD EPYC of "
                  "the precision section above."),
    Block(name="recipes-mpnet-cost", kind="run-cost", marker="recipes-mpnet-cost",
          doc="docs/benchmarks.md", heading="",
          runs={"main": Runs(folder=f"{RESULTS}/recipes-mpnet")}, options={"recipe": True},
          text={"none": "no finished run yet.", "body": """\
**MPNet-base recipe search** (`bash benchmarks/recipes/search_mpnet.sh`, bf16 where native):
{total} hours of one core so far ({counted}).

{table}"""}),
    Block(name="minilm-recipes-cost", kind="run-cost", marker="minilm-recipes-cost",
          doc="docs/benchmarks.md", heading="",
          runs={"main": Runs(folder=f"{RESULTS}/minilm-recipes")},
          text={"none": "no finished run yet.", "body": """\
**MiniLM-L6 with the recipes** (`bash benchmarks/minilm_recipes.sh`, fp32, as the search; all
33 cells): {total} hours of one core ({counted}); the processes that finished the runs took {wall}
hours of wall time, sweeps and timing included.

{table}"""}),
    Block(name="mpnet-claims-cost", kind="run-cost", marker="mpnet-claims-cost",
          doc="docs/benchmarks.md", heading="",
          runs={"main": Runs(folder=MPNET_CLAIMS)},
          text={"none": "no finished run yet.", "body": """\
**MPNet-base on RTE and CoLA, for the claims** (`benchmarks/mpnet-claims.toml`, phase 0 of
`bash benchmarks/mpnet_recipes.sh`, bf16 where native): {total} hours of one core ({counted}).
Seed 1's full models are the recipe search's checkpoints, reused: their runs record the search's
training time. A run resumed after an interruption records the wall time of the process that
finished it alone, which can be less than its training time.

{table}"""}),
    Block(name="mpnet-recipes-cost", kind="run-cost", marker="mpnet-recipes-cost",
          doc="docs/benchmarks.md", heading="",
          runs={"main": Runs(folder=MPNET)},
          text={"none": "no finished run yet.", "body": """\
**The 12-layer benchmark** (`benchmarks/mpnet-recipes.toml`, `bash benchmarks/mpnet_recipes.sh`,
bf16 where native, the full model timed beside each point): {total} hours of one core so far
({counted}: the cascade sweeps static's models, so its training is theirs); the processes that
finished the runs took {wall} hours of wall time, sweeps and timing included (a run resumed from
checkpoints trained earlier records only what was left).

{table}"""}),
    Block(name="ner", kind="token-benchmark", marker="ner",
          heading="## Sequence labelling: CoNLL-2003 and WNUT-17",
          runs={"main": Runs(folder=f"{RESULTS}/ner-minilm"),
                "rules": Runs(folder=f"{RESULTS}/ner-minilm-tokee", methods=("sentee", "deebert"))},
          options={"tasks": ["conll2003", "wnut17"], "budgets": [0.33, 0.5, 0.75, 1.0],
                   "methods": ["static", "deebert", "sentee", "sentee+tokee", "deebert+tokee"],
                   "word_points": [0.05, 0.1, 0.2, 0.3], "reference_name": "minilm-l6-static-ner"},
          text={"none": "No finished static token run yet.",
                "task": """\
### {title}

**The static curve** (first k layers, a token head after layer k; entity F1 on dev, ± over seeds)

{static}

**Best point within a FLOPs budget** (entity F1, seed-averaged points; in brackets the FLOPs
speed-up over the full model)

{budgets}

**Where TOKEE's words exit** (mean layer at which entity words, gold tag not `O`, and the other
words were decided; the share of words decided before the last layer)

{words}""",
                "body": """\
Built by `python benchmarks/report.py --block ner` from {n_runs:~run} of
`benchmarks/ner-minilm.toml` (`bash benchmarks/ner_minilm.sh`; seeds {seeds}):
`benchmarks/results/ner-minilm` (static k = 1..6, DeeBERT's two stages with the survey's
mean-entropy exit, SENTEE's joint training and exit) and `ner-minilm-tokee` (TOKEE swept on the
SENTEE and DeeBERT models: each threshold runs the model with halted words' states copied).
MiniLM-L6 (all-MiniLM-L6-v2: uncased, 6 layers, hidden 384), a token head per exit, every
training sentence at up to 128 pieces, lr 1e-4, 3 epochs on CoNLL-2003 and 5 on WNUT-17.
Hardware: {hardware}, one thread per run, two runs at a time. Entity-level micro F1 (seqeval,
conlleval's chunking) on dev; FLOPs per sentence at its real length, counted per token for TOKEE
(each layer at its live pieces). The labelled test sets are withheld: the seed-1 test-split runs
(`ner-minilm-test`) are for `eebench export-conll`.

**Published full models, for scale** (entity F1; this page's dev figures are the k = 6 rows
of the static curves below). Dev against dev where a source gives a dev figure: on CoNLL-2003,
Devlin et al. report both; WNUT-17's papers report the test set alone (the shared task ranked on
it), so no dev figure stands beside this page's. Test figures sit several points below dev on
both tasks (CoNLL-2003's test set is later news than its training and dev sets; WNUT-17's test
entities are new by design), so a test figure is no bar for a dev one. MiniLM-L6 here is uncased,
sentence by sentence (no document context) and 6 layers deep.

| model | CoNLL-2003 dev | CoNLL-2003 test | WNUT-17 test | source |
| --- | --- | --- | --- | --- |
| BERT-base (cased, document context) | 96.4 | 92.4 | – | Devlin et al., NAACL 2019, Table 7 |
| BERT-large (cased, document context) | 96.6 | 92.8 | – | Devlin et al., NAACL 2019, Table 7 |
| best W-NUT 2017 shared-task system | – | – | 41.9 | Derczynski et al., W-NUT 2017 |

**ELUE score against the static token models** (mean over a method's points of its entity F1
minus the static curve at its FLOPs, in points; ± over seeds)

{elue}

{tasks}

**Reading (three seeds).** Static's separately fine-tuned first-k models make a strong curve to
beat: two layers already reach 84.7 F1 on CoNLL-2003, and the seeds agree within 0.3 F1 there
(within about a point on WNUT-17, whose dev set is a third the size). Sentence-level exits fall
below that curve on both tasks. DeeBERT's off-ramps are trained on a frozen backbone, so its first
exit is weak (about 65 F1 on CoNLL-2003 against 77 for a fine-tuned one-layer model), and once the
mean entropy lets sentences go most of them leave there (ELUE score -9.8 on CoNLL-2003); on WNUT-17
it still beats static at a third of the FLOPs (44.0 against 36.9), where static's one-layer model
is weakest. SENTEE's joint training gives better shallow exits but a weaker last layer (87.3
against 90.1 on CoNLL-2003, 48.9 against 56.5 on WNUT-17, seed means). A sentence-level decision
also makes every word of a sentence pay for its hardest word. Token-level exit removes that: TOKEE
lifts both models (SENTEE's from -2.25 to -1.05 on CoNLL-2003 and from -6.64 to -4.18 on WNUT-17),
and on the DeeBERT model it is the only method above the static curve on both tasks (+0.52 ± 0.05
and +2.56 ± 0.82): 90.0 F1 on CoNLL-2003 at 1.4× fewer FLOPs than the full model's 90.1, and 88.8
at half its FLOPs, where the static curve gives 84.7. Entity words, the ones entity F1 counts, are
decided 0.7-0.9 of a layer later than the other words on CoNLL-2003 and 1.4-1.6 layers later on
WNUT-17, whose entities are rare and new."""}),
    Block(name="minilm-recipes", kind="static-curves", marker="minilm-recipes",
          heading="## MiniLM-L6 with a recipe per task",
          runs={"main": Runs(folder=f"{RESULTS}/minilm-recipes"), "other": MINILM},
          options={"models": {"main": "recipes", "other": "budget"},
                   "methods": ["deebert", "pabee"]},
          text={"none": "No finished static run yet: `bash benchmarks/minilm_recipes.sh` runs "
                        "the grid (resumable).",
                "task": "**{title}: the static curve (first k layers, dev)**\n\n{table}",
                "elue": "**ELUE score against each run set's own static curve (points, dev)**"
                        "\n\n{table}",
                "body": """\
Built by `python benchmarks/report.py --block minilm-recipes` from {n_runs:~run} of
`benchmarks/minilm-recipes.toml` (`bash benchmarks/minilm_recipes.sh`): MiniLM-L6 on every
training example of RTE, MRPC, STS-B and CoLA (MRPC and STS-B as ELUE's copies) with the recipe
the search chose per task (learning rate and epochs, on dev; the config says which), static
k = 1..6, DeeBERT and PABEE, three seeds. *budget* is the benchmark at the top of this page
(1,500-4,000 training examples, one or two epochs), kept as what it is: a budget benchmark whose
full models sit near their majority baselines on these four tasks. CPU only.

{tables}"""}),
    Block(name="full-models", kind="full-models", marker="full-models",
          heading="## Full models against published figures",
          runs={"budget": Runs(folder=f"{RESULTS}/elue-minilm", methods=("static",)),
                "search": Runs(folder=f"{RESULTS}/recipes-minilm"),
                "recipes": Runs(folder=f"{RESULTS}/minilm-recipes", methods=("static",)),
                "mpnet-search": Runs(folder=f"{RESULTS}/recipes-mpnet"),
                "mpnet": Runs(folder=MPNET, also=(MPNET_CLAIMS,), methods=("static",))},
          options={"file": "leaderboard/published.toml",
                   "models": {"MiniLM-L6, budget": "budget", "MiniLM-L6, search": "search",
                              "MiniLM-L6, recipes": "recipes",
                              "MPNet-base, search": "mpnet-search",
                              "MPNet-base, recipes": "mpnet"},
                   "pick": {"search": "best", "mpnet-search": "best"},
                   "searches": {"recipes": "search", "mpnet": "mpnet-search"},
                   "tasks": ["rte", "mrpc", "elue-mrpc", "stsb", "elue-stsb", "cola", "sst2",
                             "elue-sst2", "elue-scitail"],
                   "published": ["MiniLM-L6xH384", "DistilBERT", "TinyBERT-6", "BERT-base"],
                   "published_task": {"elue-mrpc": "mrpc", "elue-stsb": "stsb"}},
          text={"none": "No finished full model yet.", "body": """\
Built by `python benchmarks/report.py --block full-models`. Each cell is a full-depth model
(static k = L) on dev: its main metric, mean ± std over seeds, and in brackets its margin over
the majority-class baseline of the same dev labels (a constant prediction: MCC 0, correlation
0). The published columns are full models of other papers (GLUE dev; `leaderboard/published.toml`
names each number's source). ELUE's MRPC and STS-B train on GLUE's training files but have their
own dev splits, so GLUE's figures stand beside them as a scale only; ELUE SST-2 (sentence-level,
8.5k training sentences) is not GLUE's SST-2 (67k phrases).

*MiniLM-L6, budget*: the benchmark at the top of this page, 1,500-4,000 training examples, one
or two epochs, three seeds. *MiniLM-L6, search*: the best of six recipes per task
(`benchmarks/recipes/minilm-l6.toml`: learning rate 2e-5, 5e-5 or 1e-4 by 3 or 5 epochs, full
training sets, seed 1), chosen on this dev set, so optimistic by the choice. *MiniLM-L6,
recipes*: the chosen recipes, seeds 1 to 3 (`benchmarks/minilm-recipes.toml`). *MPNet-base,
search*: the better of two learning rates at 3 epochs (`benchmarks/recipes/mpnet-base.toml`;
8,000 SciTail pairs), seed 1. *MPNet-base, recipes*: the 12-layer benchmark's full models with
the chosen rates, seeds 1 to 3 as they come in (`benchmarks/mpnet-recipes.toml`; RTE and CoLA
from `benchmarks/mpnet-claims.toml`). Each column's header says how many seeds its cells have
(a cell of one seed shows no ±) and which seed is a search's own model: at seed 1 a recipe
grid trains the search's chosen recipe again, and where the task is the search's own it reuses
the search's checkpoint, so its seed 1 is the model picked on this dev set and as optimistic.

all-MiniLM-L6-v2 is not the MiniLM-L6xH384 of the MiniLM paper: it keeps every second layer of
MiniLM-L12-H384 and was trained further for sentence embeddings (no GLUE figures are published
for it).

{table}

Smallest margin over the majority baseline: {least}. The searches chose {recipes}.

Sources:

{sources}"""}),
    Block(name="claims", kind="claims", marker="claims",
          heading="## Each paper's claim, checked",
          runs={"mpnet": Runs(folder=MPNET, also=(MPNET_CLAIMS,)),
                # the recipe grid's methods and tasks (benchmarks/minilm-recipes.toml)
                "recipes": Runs(folder=f"{RESULTS}/minilm-recipes",
                                methods=("static", "deebert", "pabee"),
                                tasks=("rte", "elue-mrpc", "elue-stsb", "cola")),
                "budget": MINILM,
                # the recipe searches the first two took their recipes from
                "search": Runs(folder=f"{RESULTS}/recipes-minilm"),
                "mpnet-search": Runs(folder=f"{RESULTS}/recipes-mpnet")},
          options={"file": "leaderboard/published.toml", "tolerance": 1.0,
                   "searches": {"recipes": "search", "mpnet": "mpnet-search"},
                   "models": {"MPNet-base (12 layers)": "mpnet", "MiniLM-L6 (recipes)": "recipes",
                              "MiniLM-L6 (budget)": "budget"}},
          text={"none": "No claim in `leaderboard/published.toml`.", "body": """\
Built by `python benchmarks/report.py --block claims` from `leaderboard/published.toml`. A row
is a claim in its paper's own terms: the paper's model, task and split, its full model's score
and early exit's at a speed-up counted as the paper counts it (layers: L over the mean exit
layer; FLOPs; wall time). eebench measures the same change on its own runs, dev split: per seed,
the method's best point with at least the claimed speed-up, minus the same seed's full model
(static k = L), mean ± std over seeds; wall time compares real dynamic inference at batch size 1
with the full model timed in the same run (CPU, 100 samples; the 12-layer benchmark's ELUE tasks
and the MiniLM recipe grid time it beside each point, batch by batch, the other runs once before
their sweep). ELUE-score claims are measured as
the method's ELUE score against its own model's static curve. Choosing the best point on the dev
set it is scored on is optimistic, as choosing a threshold on dev is in the papers. A claim
against another method ("outperforms PABEE") is measured as the difference from that method, each
measured the same way on the same seeds. A claim about a benchmark rather than a task ("on
GLUE", ELUE's six tasks) is measured on each task it lists that the run set has (with runs of
both methods, for a claim against another), averaged per seed; the cell says over how many.
*Verdict*, from the first column with a measurement:
agrees when the measured change is at least the claimed one, within noise when it is below by at
most {tolerance} point (or two seed deviations, when larger), disagrees otherwise.
*MPNet-base (12 layers)* is the 12-layer benchmark (on RTE and CoLA, where the benchmark does not
run, `benchmarks/mpnet-claims.toml`: static k = 12, DeeBERT and PABEE with the recipe search's
rates, three seeds), *MiniLM-L6 (recipes)* the recipe grid and
*MiniLM-L6 (budget)* the budget benchmark at the top of this page; "not run yet" marks runs not
yet in, "–" a claim whose method or tasks the grid does not have (the recipe grid: static,
DeeBERT and PABEE on RTE, MRPC, STS-B and CoLA), "max" a speed-up the method never reaches
there, "(1 of 3 seeds reach ...)" a mean over the seeds whose runs reach it. A column's header
says how many seeds its cells have (a cell of one seed shows no ±), and which seed is a recipe
search's own model: the recipe grid and the 12-layer runs train their search's chosen recipe
again at seed 1, reusing the search's checkpoint where the task is the search's own, so the full
model of that seed is the one the search picked on this dev set, optimistic by the choice.

{table}

{notes}

**Reading.** The 12-layer model is in, on three seeds, for the three claims made on RTE and
CoLA (`benchmarks/mpnet-claims.toml`). DeeBERT's RTE claim is within noise: −0.7 ± 1.6 (+0.4, −2.5
and 0.0 on seeds 1 to 3; seed 1's best point is 73.6 at 8.8 layers of 12 and 1.35× in wall time,
against 73.3 for the full model). These runs time the full model once, before the sweep, and the
other worker's load skewed seed 2's ratios: its point that never exits early times at 0.83× the
full model (1.03× and 0.97× on seeds 1 and 3). The 12-layer benchmark's runs time the full model
beside each point instead (`[timing] baseline = "paired"`). PABEE's two claims do not hold. At
1.57× in layers its best point is 6.9 ± 1.1 points below the full model on RTE (seed 1: 66.4 at
6.4 layers); its own last exit (71.5, 68.6, 71.5) is within 3 points of the separately trained
full models (73.3, 71.5, 69.0) either way, so the loss is in the shallow exits the speed-up needs.
On CoLA it is 3.5 ± 1.4 MCC below (patience 5, about 6.9 layers, on every seed): exits 1 to 4
predict one class on every seed, so patience 1 to 3 does too (MCC 0), while its last exit matches
the full model (55.3, 57.3, 58.3 against 56.3, 56.2, 57.3). PABEE's gains over the full
model were measured on ALBERT (one layer's weights shared across its depth); its BERT-base row is a
small loss (−0.1 at 1.62×), and MPNet-base loses more. The 12-layer benchmark's first task,
ELUE MRPC (seed 1), is in. There DeeBERT's MRPC claim is within noise (−1.6 at 1.45× in wall
time, timed beside each point, against −1.3 claimed), and PABEE's does not hold (−2.4 at 1.57×
in layers: patience 5, 7.2 layers, against the full model's 91.0), for the same reason as on
CoLA: patience 1 to 4 score 74.8 to 77.4, about the majority class's 74.8. The other claims are
read, until the 12-layer benchmark's runs are in, on the 6-layer budget runs. There DeeBERT's
three claims hold:
the best point at the claimed wall-time speed-up is within a point of the full model. PABEE's do
not, except on RTE, where the seeds spread by ±3.6 points: its claims are gains over ALBERT's full
model, and on a 6-layer model a layer speed-up of 1.57× leaves at most 3.8 layers, which PABEE
reaches only at patience 1 or 2, where it trusts shallow exits (on STS-B, patience 1 exits at 2.9
layers on average with a correlation of 34.5). The ELUE-score claims are relative to a different
reference (ElasticBERT-base's curve on ELUE's test sets), so their order is what compares:
ElasticBERT first (−0.76 over MRPC and SciTail), as on the leaderboard, but BERxiT (−2.73 on the
same two tasks) above PABEE (−3.76 over five tasks, −3.77 on those two), the other order. Of the
claims against another method, PCEE's holds (1.8 ELUE points above PABEE over MRPC and SciTail:
above it on SciTail on every seed, level on MRPC), SWEET's against jointly trained exits holds on
the mean but with a spread (±3.6) larger than the gap, and SWEET against the cascade (−0.8 ± 0.4)
and the cascade against DeeBERT (−0.6 ± 1.5) are within the noise of three seeds. Every verdict
will be read again on the 12-layer benchmark. The MiniLM recipe grid (every cell in, three seeds;
full models 59.9, 57.4 and 55.6 on RTE, 2.9 to 7.2 points above majority, 84.6, 83.3 and 82.7 on
MRPC, 85.8, 85.8 and 85.5 correlation on STS-B, 33.6, 30.3 and 30.9 MCC on CoLA) reads as the budget
runs do. DeeBERT's two claims there hold: +1.7 ± 2.4 on RTE at 1.12× in wall time (seed 3's +4.3
comes mostly from DeeBERT's own last exit, 59.6, above a weak full model, 55.6, not early exit's
doing), +0.2 ± 0.5 in F1 on MRPC at 1.45× (−0.3, +0.3 and +0.8 by seed; seed 1: 87.1 at 3.8 layers
of 6 against the full model's 87.4). PABEE's four do not: 1.57× in layers asks a 6-layer model to
exit by 3.8 layers on average, which PABEE reaches only at patience 1 or 2 (RTE −2.3 ± 1.8; MRPC
−4.4 ± 0.5 and CoLA −9.9 ± 1.9 at patience 2, 3.2 to 3.3 layers; STS-B −26.4 at patience 1 on seed
1, 59.5 at 3.7 layers, while on seeds 2 and 3 patience 1 exits at 4.0 and 3.9 layers, short of
1.57×). Its own last exit is level with the full model on STS-B (86.2, 85.6 and 86.2 against 85.8,
85.8 and 85.5) and below it on MRPC (82.2, 80.8 and 81.7 against 84.6, 83.3 and 82.7) and CoLA
(28.1, 25.5 and 28.3 against 33.6, 30.3 and 30.9)."""}),
    Block(name="elasticbert-curve", kind="published-curve", marker="elasticbert-curve",
          heading="### The 12-layer curves next to ElasticBERT-base's (ELUE SST-2)",
          runs={"main": Runs(folder=MPNET if TWELVE else f"{RESULTS}/elue-mpnet")},
          options={"file": "leaderboard/published.toml", "model": "ElasticBERT-base",
                   "task": "elue-sst2", "methods": ["static", "deebert", "pabee", "elasticbert"],
                   "figure": "docs/figures/published/elasticbert-sst2.png"},
          text={"none": "No finished static run of the task yet.", "body": f"""\
Built by `python benchmarks/report.py --block elasticbert-curve` from {{n_runs:~run}} of
{TWELVE_SAID}. ElasticBERT-base's curve is ELUE's reference, on ELUE's withheld test set
({{source}}); eebench's points are on the dev set, so the two are set side by side, not scored
against each other. FLOPs per sample at each sample's real length, as ELUE counts them; a full
12-layer MPNet-base costs 4.27 GFLOPs on this task, ElasticBERT-base's 12 layers 4.24. Each
method's column is its best seed-averaged point at no more FLOPs.

![ELUE SST-2: the 12-layer points and ElasticBERT-base's published
curve](figures/published/elasticbert-sst2.png)

{{table}}"""}),
    Block(name="decoder", kind="decoders", marker="decoder",
          heading="## Decoder LLMs: per-token exits and self-speculation on SmolLM2-135M",
          runs={"main": Runs(folder=f"{RESULTS}/decoder-smollm2")},
          options={"figures": "docs/figures/decoder", "link": "figures/decoder"},
          text={"none": "No finished decoder run yet: `bash benchmarks/decoder_smollm2.sh`.",
                "task": """\
### {title}

{figure}

**Every point** (quality in % of the full model's output; MFLOPs per generated or predicted
token; wall × is greedy decoding's time per token over the point's, measured side by side at
batch size 1 where the run timed it, and wall × ÷ FLOPs × how much of the FLOPs speed-up the
clock saw; the last column is what real decoding said about the simulation)

{points}

**ELUE-style score against the static truncation** (each point's quality minus the static
curve's at its FLOPs per token, averaged over the method's points; the FLOPs axis clamps at the
full model, so a lossless method that costs more FLOPs than it scores 0)

{scores}""",
                "body": """\
Built by `python benchmarks/report.py --block decoder` from {n_runs:~run} of
`bash benchmarks/decoder_smollm2.sh` (`benchmarks/results/decoder-smollm2`): SmolLM2-135M-Instruct
(30 layers, hidden 576, a 49,152-token tied LM head, fp32), exits after layers 6, 12, 18 and 24.
humaneval-gen: 8 HumanEval prompts, exactly 32 greedy tokens each, quality as token agreement
with the full model's greedy output; imdb-lm: 64 IMDb test reviews of up to 256 tokens,
teacher-forced, quality as top-1 agreement with the full model. Two kinds of exit: the logit lens
(the final norm and the LM head read after layer k, untrained: the `static` curve every other
point is scored against) and adapter exits EE-Tuning trained on the frozen model ({tuning}, on
imdb-lm's training reviews; the same exits serve both tasks). Self-speculation and its
per-prompt choice of exit are lossless by construction; every self-speculation point was also
decoded for real, and the table says whether its tokens equal greedy's and its accepted lengths
the simulated ones, prompt by prompt. CALM's points assume an oracle cache; at three thresholds
it was also decoded for real with the exited states copied into the skipped layers, and the
table gives the real quality and its difference from the oracle. Hardware: {hardware}; no GPU.

{tasks}

**Reading (one model, one seed, CPU).** On SmolLM2-135M the untrained logit lens is a poor exit:
truncated at layer 24 of 30 the model agrees with its full depth on 5.9 % of 32 greedy tokens
of code and on 32.1 % of next tokens of reviews, and below layer 24 on at most 13.8 %. Per-token
exit does not rescue it. Under an oracle cache CALM reaches 89 % agreement on code at threshold
0.99, but each exit head it reads costs 56.6 MFLOPs (eight layers' worth, with a 49k-token
vocabulary), so it pays 1.6 times the full model's FLOPs per token to get there; decoded for
real, with the exited states copied into the skipped layers' caches, it agrees on 31 % at that
threshold, 58 points below its oracle: the copied states corrupt what later tokens attend to,
the effect the oracle simulation cannot see. EE-Tuning's adapter exits, trained for 10 minutes
of one core on 32 review windows, lift every exit on reviews (layer 6: 17.1 % instead of 4.5 %;
layer 24: 41.9 % instead of 32.1 %) and score above the lens curve there, but not on code, which
they never saw: there the truncated models still agree on 1-6 %, and self-speculation's
acceptance rises only a little (43 % against 38 % at exit 24, one draft). Distilled from the
full model's distribution, trained exits are rarely confident, so CALM on them hardly exits and
costs more than the full model. Self-speculation is lossless at every (k, d): real decoding
reproduced greedy's tokens and the simulated acceptance at all 24 checked points of the two
humaneval-gen runs. Its speed follows its acceptance: with the lens it runs slower than plain
greedy decoding at every point on this CPU (the run of trained exits was not timed), and in
FLOPs per token it never saves (every token passes all 30 layers once, and
every draft pays an exit head). The published 1.8x of LayerSkip's self-speculation rests on a
model pretrained with an early-exit loss and layer dropout, which SmolLM2 is not
(`benchmarks/literature/decoders/` holds that setting for a GPU with the hub)."""}),
    Block(name="decoder-timing", kind="decoders", marker="decoder-timing",
          doc="docs/benchmarks.md", runs={"main": Runs(folder=f"{RESULTS}/decoder-smollm2")},
          options={"part": "timing"},
          text={"body": """\
Built by `python benchmarks/report.py --block decoder-timing` from the timed humaneval-gen runs
of `bash benchmarks/decoder_smollm2.sh` (docs/results.md, "Decoder LLMs"). Hardware: {hardware};
the machine ran other jobs beside it, so absolute times are noisy; the ratios, measured side by
side in one process, are what to read. Wall time per token at batch size 1, each decode of
exactly the same number of new tokens, after a first (cold) call reported apart; every point
decoded for real was timed beside the full model's greedy decoding in the same run.

{timing}"""}),
    Block(name="shift", kind="shift", marker="shift", heading="## Domain shift",
          runs={"main": Runs(folder=f"{RESULTS}/shift-minilm")},
          options={"trained_on": "sst2", "evaluated": ["sst2", "elue-sst2", "elue-imdb"],
                   "methods": ["deebert", "pabee"], "shown": 6,
                   "setting": {"threshold": "entropy <", "patience": "patience"}},
          text={"method": "**{method}**\n\n{table}", "body": """\
Each cell: accuracy (%) / average exit layer / ECE (%) / consistency with the model's own
full-depth prediction (%), on {evaluated}. Trained on {trained_on} only, seed 1.

{tables}"""}),
]
