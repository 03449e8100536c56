"""Peers in one run: the authors' own DeeBERT and PABEE evaluation loops, side by side with
eebench's one-pass simulation and its real dynamic inference, on the same fine-tuned model and the
same samples, in one process, one thread.

For each method: load the run directory (benchmarks/peers.toml) and its checkpoint; write the
model's weights in the authors' layout and build the authors' model class from their code (a
scratch copy at a recorded commit, patched for transformers 5 as benchmarks/_peers.py lists);
check that every exit's logits are equal to float tolerance (else stop before timing anything);
then, at each threshold (DeeBERT) or patience (PABEE), run and time

- the authors' evaluation loop as their GLUE script wrote it (batch size 1, their forward in eval
  mode: DeeBERT exits through its HighwayException, PABEE counts its patience), over inputs
  padded to the run's max_seq_length as their feature conversion pads them, and over unpadded
  inputs (each sample at its own length, as eebench's bs-1 loop runs it);
- eebench's real dynamic inference at batch size 1;

and once, for every setting together, eebench's one pass (every exit's logits in batches of 64,
then the rule simulated per setting). It reports accuracy, mean exit layer, the samples whose exit
layer or prediction differ between the codes, each one's wall time (and CPU time) and the ratios;
and Zero-Time-Waste's own sweep function over the same exit logits against eebench's simulation
(its NLP pipeline does not run here: docs/benchmarks.md, "Peers in one run", says why).

    python benchmarks/peers.py --data-dir ../shared/data     # bash benchmarks/peers.sh does all
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import time
from pathlib import Path
from statistics import median

import numpy as np
from _common import REPO, hardware
from _peers import (
    PATCHES,
    PEERS,
    SCRATCH,
    ZTW,
    agreement,
    authors_state_dict,
    file_hashes,
    load_modules,
    loop_function,
    peer_dir,
    ztw,
)

OUT = REPO / "benchmarks/results/peers-minilm"
TOLERANCE = 1e-4  # largest |logit difference| the parity check accepts
MARGIN = 1e-4  # a decision this close to its threshold may flip on float noise (rules/engine.py)


# ------------------------------------------------------------------------------ clocks
CLOCKS = ("wall", "cpu")  # elapsed time; this process's CPU time (one thread: its own work)


def start_clocks() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def since(start: tuple[float, float]) -> dict[str, float]:
    return {"wall": time.perf_counter() - start[0], "cpu": time.process_time() - start[1]}


def medians(timings: list[dict[str, float]]) -> dict[str, float]:
    return {c: median(t[c] for t in timings) for c in CLOCKS}


# ------------------------------------------------------------------------------ the data
class Samples:
    """The run's samples as the authors' loops read them: (input_ids, attention_mask,
    token_type_ids, label) each, padded to `pad_to` or not padded at all."""

    def __init__(self, data, pad_to: int | None):
        import torch

        self.rows = []
        for i in range(len(data)):
            n = data.lengths[i]
            width = pad_to or n
            ids = torch.zeros(width, dtype=torch.long)
            ids[:n] = torch.tensor(data.input_ids[i])
            mask = (torch.arange(width) < n).long()
            types = torch.zeros(width, dtype=torch.long)
            types[:n] = torch.tensor(data.token_type_ids[i])
            self.rows.append((ids, mask, types, torch.tensor(data.labels[i])))

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


def loop_namespace(folder: Path, method: str, samples: dict):
    """The names the authors' GLUE script gives its evaluate(): its imports, a logger, their
    data (`load_and_cache_examples` returns the current Samples) and GLUE's SST-2 metric; and
    evaluate() defined in them."""
    import logging
    from functools import partial

    import torch
    from torch.utils.data import DataLoader, SequentialSampler
    from torch.utils.data.distributed import DistributedSampler
    from tqdm import tqdm

    ns = {"os": os, "time": time, "np": np, "torch": torch, "DataLoader": DataLoader,
          "SequentialSampler": SequentialSampler, "DistributedSampler": DistributedSampler,
          "logger": logging.getLogger(f"peers.{method}"),
          "tqdm": partial(tqdm, disable=True),  # the progress bar off
          "load_and_cache_examples": lambda args, task, tokenizer, evaluate=False: samples["now"],
          # transformers 2's glue_compute_metrics("sst-2", ...): {"acc": simple_accuracy}
          "compute_metrics": lambda task, preds, labels: {"acc": float((preds == labels).mean())}}
    return ns, loop_function(folder, method, ns)


def loop_args(method: str, scratch_out: Path, value: float):
    """The script's argparse namespace, as its eval command line sets it (batch size 1)."""
    import torch

    return argparse.Namespace(
        task_name="sst-2", output_dir=str(scratch_out / method), local_rank=-1, n_gpu=0,
        per_gpu_eval_batch_size=1, device=torch.device("cpu"), model_type="bert",
        output_mode="classification", eval_highway=True, early_exit_entropy=value,
        plot_data_dir=str(scratch_out / "plotting"), model_name_or_path="./peers-minilm",
        regression_threshold=0.0, eval_all_checkpoints=True)


# -------------------------------------------------------------------- the authors' side
def their_exits(theirs, method: str, samples: Samples):
    """Every exit's logits [E, N, C] from the authors' forward at batch size 1, never exiting
    early (their threshold -1, their patience L); DeeBERT's also the L-th off-ramp's [N, C]."""
    import torch

    L = theirs.config.num_hidden_layers
    with contextlib.redirect_stdout(io.StringIO()):  # set_early_exit_entropy prints its value
        if method == "deebert":
            heads = [h.classifier for h in theirs.bert.encoder.highway] + [theirs.classifier]
            theirs.bert.encoder.set_early_exit_entropy(-1)
        else:
            heads = list(theirs.classifiers)
            theirs.bert.set_patience(L)  # the counter reaches at most L - 1: no early exit
    seen = []
    hooks = [h.register_forward_hook(lambda m, i, o: seen.append(o[0].clone())) for h in heads]
    rows = []
    with torch.no_grad():
        for ids, mask, types, _ in samples:
            seen.clear()
            theirs(input_ids=ids[None], attention_mask=mask[None], token_type_ids=types[None])
            rows.append(torch.stack(seen))
    for h in hooks:
        h.remove()
    out = torch.stack(rows, 1)  # [heads, N, C]
    if method == "deebert":  # off-ramps 1..L-1, the top classifier; the L-th off-ramp apart
        return torch.cat([out[: L - 1], out[L:]]), out[L - 1]
    return out, None


def run_theirs(evaluate, theirs, method: str, samples: dict, kind: str, value: float,
               scratch_out: Path) -> dict:
    """The authors' evaluate() over samples[kind] at one setting: wall time, what it printed and
    returned, and each sample's exit layer and prediction (read off their forward's outputs by a
    hook: DeeBERT returns the exit layer; PABEE counts computed layers in inference_layers_num)."""
    samples["now"] = samples[kind]
    layers, preds, counted = [], [], [0]

    def record(module, inputs, output):
        preds.append(int(output[1].argmax(-1)))
        if method == "deebert":
            layers.append(int(output[-1]))
        else:  # evaluate() resets the count first
            layers.append(module.bert.inference_layers_num - counted[0])
            counted[0] = module.bert.inference_layers_num

    hook = theirs.register_forward_hook(record)
    args, printed = loop_args(method, scratch_out, value), io.StringIO()
    with contextlib.redirect_stdout(printed):
        start = start_clocks()
        if method == "deebert":
            theirs.bert.encoder.set_early_exit_entropy(value)  # as their main() does
            result = evaluate(args, theirs, None, prefix="", eval_highway=True)
        else:
            result = evaluate(args, theirs, None, prefix="", patience=int(value))
        seconds = since(start)
    hook.remove()
    return {"seconds": seconds, "layers": np.array(layers), "preds": np.array(preds),
            "result": result, "printed": printed.getvalue().strip().splitlines()}


# --------------------------------------------------------------------- eebench's side
def one_pass(model, data, rules: dict) -> dict:
    """eebench's one pass: every exit's logits in batches of 64 (grouped by length), then every
    setting's decisions simulated over them."""
    from eebench.data.batching import eval_batches
    from eebench.models.outputs import collect_exit_logits
    from eebench.rules.engine import simulate

    start = start_clocks()
    out = collect_exit_logits(model, eval_batches(data, 64, sort_by_length=True))
    forward = since(start)
    decisions = {v: simulate(rule(), out.logits, False) for v, rule in rules.items()}
    return {"seconds": since(start), "forward_seconds": forward, "logits": out.logits,
            "decisions": decisions}


def dynamic(model, data, rule) -> tuple[dict[str, float], object]:
    """eebench's real dynamic inference at batch size 1 over every sample (each one collated
    inside the timed loop, as the authors' DataLoader does)."""
    from eebench.data.batching import collate
    from eebench.rules.engine import dynamic_inference

    start = start_clocks()
    dec = dynamic_inference(model, rule, (collate(data, [i]) for i in range(len(data))),
                            len(data), False)
    return since(start), dec


# ------------------------------------------------------------------------- one method
def first_rows(data, n: int):
    """The encoded split's first n samples."""
    if n >= len(data):
        return data
    keep = ("input_ids", "token_type_ids", "lengths", "labels", "ids")
    return data.__class__(**{**data.__dict__, **{k: getattr(data, k)[:n] for k in keep}})


def default_settings(method: str, run, logits) -> list[float]:
    """PABEE: the run's patiences. DeeBERT: every 4th threshold of the run's sweep, its
    second-largest, and the median entropy of the first exit (rounded to 1e-6): the threshold
    with the most samples within float noise of it, a test of ties."""
    from eebench.rules.entropy import entropy

    grid = sorted({p.sweep_value for p in run.points})
    if method != "deebert":
        return grid
    dense = round(float(entropy(logits[0]).median()), 6)
    return sorted({*grid[::4], grid[-2], dense})


def run_dir_of(out: Path, method: str) -> Path:
    found = sorted((out / "minilm-l6" / method / "sst2").glob("*/summary.json"))
    if len(found) != 1:
        sys.exit(f"{out}: {len(found)} finished {method} runs on sst2, not one "
                 "(eebench run --config benchmarks/peers.toml)")
    return found[0].parent


def measure(method: str, args) -> dict:
    from transformers import BertConfig

    from eebench.methods.base import get_method
    from eebench.run.artifacts import verify_run
    from eebench.serve.replay import load_target

    run_dir = run_dir_of(args.out, method)
    target = load_target(run_dir, 0, args.data_dir)
    model, data = target.model, target.data
    run = verify_run(run_dir)
    exit_layer = np.asarray(model.exit_layers)
    labels = np.asarray(data.labels)
    n = len(data) if args.samples is None else min(args.samples, len(data))
    data, labels = first_rows(data, n), labels[:n]
    ours = one_pass(model, data, {})  # every exit's logits (untimed: parity, settings)
    values = args.settings.get(method) or default_settings(method, run, ours["logits"])
    rule_of = get_method(run.config.method, **run.config.method_settings).exit_rule
    rules = {v: (lambda v=v: rule_of(v, False)) for v in values}

    # the authors' model, with this model's weights
    folder = peer_dir(args.scratch, method)
    peer = PEERS[method]
    module, cls = peer.model
    config, state = authors_state_dict(model, method)
    theirs = getattr(load_modules(folder, method)[module], cls)(BertConfig.from_dict(config))
    theirs.load_state_dict(state, strict=True)
    theirs.eval()
    samples = {"padded": Samples(data, data.max_seq_length), "unpadded": Samples(data, None)}
    _, evaluate = loop_namespace(folder, method, samples)
    scratch_out = args.scratch / "runs"

    # parity before timing: every exit's logits, both paddings, against eebench's one pass
    parity = {}
    for kind in ("padded", "unpadded"):
        exits, ramp_l = their_exits(theirs, method, samples[kind])
        diff = (exits - ours["logits"]).abs().amax(dim=(1, 2))
        parity[kind] = {"max_abs_diff_per_exit": [float(d) for d in diff]}
        if ramp_l is not None:
            parity[kind]["last_off_ramp_vs_top_classifier"] = float(
                (ramp_l - exits[-1]).abs().max())
    worst = max(max(p["max_abs_diff_per_exit"]) for p in parity.values())
    print(f"{method}: parity, largest |logit difference| over {n} samples and "
          f"{len(exit_layer)} exits: {worst:.2e}", file=sys.stderr)
    if not worst < TOLERANCE:
        sys.exit(f"{method}: the authors' model does not compute eebench's logits "
                 f"({worst:.2e} > {TOLERANCE}): not timing anything")

    # warm up every path, then time side by side: per repeat, every setting in turn
    warm = {k: [s[i] for i in range(min(16, n))] for k, s in samples.items() if k != "now"}
    for kind in ("padded", "unpadded"):
        their_exits(theirs, method, warm[kind])
    dynamic(model, first_rows(data, 16), rules[values[0]]())
    times = {v: {"padded": [], "unpadded": [], "dynamic": []} for v in values}
    passes, first, changed = [], {}, 0  # changed: decisions unlike the first repeat's
    for _ in range(args.repeats):
        passes.append(one_pass(model, data, rules))
        for v in values:
            for kind in ("padded", "unpadded"):
                got = run_theirs(evaluate, theirs, method, samples, kind, v, scratch_out)
                times[v][kind].append(got["seconds"])
                was = first.setdefault((v, kind), got)
                changed += int((was["layers"] != got["layers"]).sum()
                               + (was["preds"] != got["preds"]).sum())
            seconds, dec = dynamic(model, data, rules[v]())
            times[v]["dynamic"].append(seconds)
            was = first.setdefault((v, "dynamic"), dec)
            changed += int((was.exit_index != dec.exit_index).sum()
                           + (was.prediction != dec.prediction).sum())

    rows = []
    for v in values:
        sim = passes[0]["decisions"][v]
        sim_layer, dyn = exit_layer[sim.exit_index], first[(v, "dynamic")]
        dyn_layer = exit_layer[dyn.exit_index]
        codes = {"sim": (sim_layer, sim.prediction), "dynamic": (dyn_layer, dyn.prediction)}
        for kind in ("padded", "unpadded"):
            got = first[(v, kind)]
            codes[f"authors_{kind}"] = (got["layers"], got["preds"])
        pairs = {f"{a}~{b}": agreement(*codes[a], *codes[b], near=sim.margin < MARGIN)
                 for a, b in (("authors_padded", "sim"), ("authors_unpadded", "sim"),
                              ("authors_padded", "dynamic"), ("dynamic", "sim"))}
        differ = sorted({i for d in pairs.values() for i in d["samples"]})
        details = [{"sample": i, "margin": float(sim.margin[i]),
                    **{k: [int(lay[i]), int(p[i])] for k, (lay, p) in codes.items()}}
                   for i in differ[:20]]
        med = {k: medians(t) for k, t in times[v].items()}
        rows.append({
            method_param(method): v,
            "accuracy": {k: 100 * float((p == labels).mean()) for k, (_, p) in codes.items()},
            "mean_exit_layer": {k: float(np.mean(lay)) for k, (lay, _) in codes.items()},
            "authors_result": {k: first[(v, k)]["result"] for k in ("padded", "unpadded")},
            "authors_printed": first[(v, "padded")]["printed"][-4:],
            "disagreements": pairs, "disagreeing_samples": details,
            "seconds": med, "seconds_raw": times[v],
            "ratio_authors_over_dynamic": {k: {c: med[k][c] / med["dynamic"][c] for c in CLOCKS}
                                           for k in ("padded", "unpadded")},
        })
    sweep = {k: {c: sum(r["seconds"][k][c] for r in rows) for c in CLOCKS}
             for k in ("padded", "unpadded", "dynamic")}
    sweep.update(one_pass=medians([p["seconds"] for p in passes]),
                 one_pass_forward=medians([p["forward_seconds"] for p in passes]))
    return {
        "run_dir": str(run_dir.relative_to(REPO)), "samples": n, "settings": values,
        "ztw_sweep": ztw(args.scratch, method, ours["logits"], labels, exit_layer),
        "peer": {"repo": peer.repo, "commit": peer.commit, "files_sha256": file_hashes(folder,
                 method), "patches": [p.__dict__ for p in PATCHES[method]]},
        "parity": parity, "rows": rows, "sweep_seconds": sweep,
        "decisions_changed_between_repeats": changed,
        "sweep_ratio_over_one_pass": {k: {c: sweep[k][c] / sweep["one_pass"][c] for c in CLOCKS}
                                      for k in ("padded", "unpadded", "dynamic")},
    }


def method_param(method: str) -> str:
    return "threshold" if method == "deebert" else "patience"


# ------------------------------------------------------------------------------- report
def table(report: dict) -> str:
    lines = [f"{report['hardware']}; load average {report['load_before']} before, "
             f"{report['load_after']} after; median of {report['repeats']} runs each; seconds "
             "of wall time (this process's CPU time in brackets).", ""]
    for method, m in report["methods"].items():
        param, z = method_param(method), m["ztw_sweep"]
        lines += [
            f"**{method}** ({m['peer']['repo']}@{m['peer']['commit'][:12]}; {m['samples']} "
            f"SST-2 dev samples; parity: largest |logit difference| "
            f"{max(max(p['max_abs_diff_per_exit']) for p in m['parity'].values()):.1e})", "",
            f"| {param} | accuracy: authors / sim / dyn | mean exit layer: authors / sim / dyn "
            "| differ: authors~sim, authors unpadded~sim, dyn~sim | authors s: padded / "
            "unpadded | eebench dyn s | authors ÷ dyn: padded / unpadded |",
            "| ---: | --- | --- | --- | ---: | ---: | ---: |"]
        for r in m["rows"]:
            acc, lay, d, s = r["accuracy"], r["mean_exit_layer"], r["disagreements"], r["seconds"]
            ratio = r["ratio_authors_over_dynamic"]
            lines.append(
                f"| {r[param]:g} | {acc['authors_padded']:.2f} / {acc['sim']:.2f} / "
                f"{acc['dynamic']:.2f} | {lay['authors_padded']:.3f} / {lay['sim']:.3f} / "
                f"{lay['dynamic']:.3f} | {d['authors_padded~sim']['either']}, "
                f"{d['authors_unpadded~sim']['either']}, {d['dynamic~sim']['either']} | "
                f"{_both(s['padded'], 1)} / {_both(s['unpadded'], 1)} | "
                f"{_both(s['dynamic'], 1)} | {_both(ratio['padded'], 2)} / "
                f"{_both(ratio['unpadded'], 2)} |")
        sw, rt = m["sweep_seconds"], m["sweep_ratio_over_one_pass"]
        lines += ["", f"The {len(m['rows'])} settings together: the authors' loop "
                  f"{_both(sw['padded'], 1)} s padded, {_both(sw['unpadded'], 1)} s unpadded; "
                  f"eebench's dynamic inference {_both(sw['dynamic'], 1)} s; eebench's one pass "
                  f"{_both(sw['one_pass'], 2)} s (its forward {_both(sw['one_pass_forward'], 2)}"
                  f" s). The authors' loop over the sweep takes {_both(rt['padded'], 1)} times "
                  f"the one pass's time padded, {_both(rt['unpadded'], 1)} unpadded.", "",
                  f"Zero-Time-Waste's own sweep function ({z['rule']}, {z['settings']} "
                  "settings) over the same exit logits against eebench's simulation of that "
                  f"rule: {z['settings_differing']} settings differ.", ""]
    return "\n".join(lines)


def _both(t: dict[str, float], digits: int) -> str:
    return f"{t['wall']:.{digits}f} ({t['cpu']:.{digits}f})"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", type=Path,
                   default=Path(os.environ.get("EEBENCH_DATA_DIR", REPO.parent / "shared/data")))
    p.add_argument("--out", type=Path, default=OUT, help="the runs of benchmarks/peers.toml")
    p.add_argument("--scratch", type=Path, default=SCRATCH, help="the peers' code: "
                   "<scratch>/<name>@<commit> (never in this repository)")
    p.add_argument("--methods", default="deebert,pabee")
    p.add_argument("--thresholds", default=None, help="DeeBERT's (default: every 4th value "
                   "of the run's sweep, its second-largest, the first exit's median entropy)")
    p.add_argument("--patiences", default=None, help="PABEE's (default: the run's sweep)")
    p.add_argument("--samples", type=int, default=None, help="the first N (default: all)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--peers", action="store_true", help="print 'repo commit' per peer and stop")
    args = p.parse_args()
    if args.peers:
        print("\n".join([f"{peer.repo} {peer.commit}" for peer in PEERS.values()]
                        + [" ".join(ZTW)]))
        return
    import torch

    torch.set_num_threads(1)
    os.chdir(REPO)  # the run directories name their checkpoints from here
    args.out, args.scratch = args.out.resolve(), args.scratch.resolve()
    args.settings = {"deebert": _floats(args.thresholds), "pabee": _floats(args.patiences)}
    load_before = [round(x, 2) for x in os.getloadavg()]
    methods = {m: measure(m, args) for m in args.methods.split(",")}
    report = {"hardware": hardware(), "threads": torch.get_num_threads(),
              "load_before": load_before, "load_after": [round(x, 2) for x in os.getloadavg()],
              "repeats": args.repeats, "methods": methods,
              "zero_time_waste": {"repo": ZTW[0], "commit": ZTW[1], "pipeline_ran": False,
                                  "sweep_function_ran": "methods.<method>.ztw_sweep"}}
    text = table(report)
    (args.out / "peers.json").write_text(json.dumps(report, indent=1, default=_json) + "\n")
    (args.out / "table.md").write_text(text + "\n")
    print(text)


def _floats(text: str | None) -> list[float] | None:
    return [float(v) for v in text.split(",")] if text else None


def _json(x):
    return x.item() if hasattr(x, "item") else x.tolist() if hasattr(x, "tolist") else str(x)


if __name__ == "__main__":
    main()
