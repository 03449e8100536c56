"""Decoder submissions built from decoder run directories (eebench.submit.schema's
DecoderSubmission; eebench.submit.decoder_check checks them).

`build_decoder_submission` reads the runs (finished, every file as its summary recorded it), the
model's config (its shapes: the FLOPs are counted from them) and copies every point of every
method; the result is checked as `eebench validate` checks a file from anyone, so a run whose
model config does not give its recorded FLOPs is refused at once.
"""


from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

from pydantic import ValidationError

from eebench.errors import DataError
from eebench.io import sha256_file
from eebench.submit.decoder_schema import (
    DecoderModelInfo,
    DecoderPointEntry,
    DecoderRunEntry,
    DecoderShapeInfo,
    DecoderSubmission,
    DecoderTaskEntry,
)
from eebench.submit.schema import Environment

POINT_FIELDS = tuple(DecoderPointEntry.model_fields)


def _shape(name: str) -> DecoderShapeInfo:
    """The model's shapes, from its config (no weights loaded)."""
    from transformers import AutoConfig

    from eebench.measure.decoder_flops import DecoderShape
    from eebench.models.backbones import from_pretrained
    from eebench.models.decoders import DECODER_HINT, check_decoder_dir, quiet

    with quiet():
        config = from_pretrained(AutoConfig.from_pretrained, name, check_dir=check_decoder_dir,
                                 hint=DECODER_HINT)
    s = DecoderShape.of(config)
    return DecoderShapeInfo(layers=s.layers, hidden=s.hidden, heads=s.heads,
                            kv_heads=s.kv_heads, head_dim=s.head_dim,
                            intermediate=s.intermediate, vocab=s.vocab)


def _model(run, shape: DecoderShapeInfo) -> DecoderModelInfo:
    from eebench.errors import EebenchError
    from eebench.models.backbones import resolve_backbone
    from eebench.submit.build import model_dir_sha256

    name = run.config.model
    try:
        where = Path(resolve_backbone(name))
    except EebenchError:
        where = Path(name)
    local = where.is_dir()
    exits = run.config.exits
    return DecoderModelInfo(
        name=name, source="local" if local or name.startswith((".", "/", "~")) else "hub",
        local_sha256=model_dir_sha256(where) if local else None, shape=shape,
        exit_layers=list(exits.layers), head=exits.head,
        rank=exits.rank if exits.head == "adapter" else None)


def build_decoder_submission(paths: Sequence[Path], name: str | None = None
                             ) -> DecoderSubmission:
    """A DecoderSubmission from decoder run directories of one model and exits, checked."""
    from eebench.score.decoder_table import load_decoder_runs
    from eebench.submit.build import eebench_info, run_environment, single_value
    from eebench.submit.validate import schema_error

    runs = load_decoder_runs(paths)
    holds = "one model and one set of exits"
    model = single_value(runs, "models", lambda r: r.config.model, holds)
    single_value(runs, "exit settings", lambda r: r.config.exits.model_dump_json(), holds)
    convention = single_value(runs, "FLOPs conventions", lambda r: r.config.flops_convention,
                              holds)
    try:
        shape = _shape(model)
        envs: list[Environment] = []
        tasks: dict[str, list[DecoderRunEntry]] = {}
        for run in sorted(runs, key=lambda r: (r.config.task, r.config.data.seed)):
            env = run_environment(run.path)
            if env not in envs:
                envs.append(env)
            greedy = run.points[0].decoding == "greedy"
            tasks.setdefault(run.config.task, []).append(DecoderRunEntry(
                seed=run.config.data.seed, config_hash=run.config.key(),
                decoding=run.points[0].decoding,
                new_tokens=run.config.data.new_tokens if greedy else None,
                sample_ids=list(run.summary.sample_ids),
                sample_tokens=list(run.summary.sample_tokens),
                points_sha256=sha256_file(run.path / "points.jsonl"),
                environment=envs.index(env),
                points=[DecoderPointEntry.model_validate(p.model_dump(include=set(POINT_FIELDS)))
                        for p in run.points]))
        first = {r.config.task: r.points[0] for r in runs}
        sub = DecoderSubmission(
            kind="decoder", name=name or f"{model.rstrip('/').split('/')[-1]}-decoder",
            created=datetime.now(timezone.utc).replace(microsecond=0).isoformat(),
            model=_model(runs[0], shape), flops_convention=convention,
            seeds=sorted({r.config.data.seed for r in runs}),
            tasks={task: DecoderTaskEntry(split=first[task].split,
                                          main_metric=first[task].main_metric,
                                          metrics=list(first[task].metrics), runs=entries)
                   for task, entries in tasks.items()},
            environments=envs, eebench=eebench_info())
    except ValidationError as e:
        raise DataError(f"the runs do not make a valid submission: {schema_error(e)}") from None
    try:
        from eebench.submit.decoder_check import check_decoder_submission

        check_decoder_submission(sub)
    except DataError as e:
        raise DataError(f"the runs do not make a valid submission: {e.message}",
                        hint=e.hint) from None
    return sub
