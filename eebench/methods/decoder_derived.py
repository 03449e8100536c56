"""What is derived from a decoder method (`eebench decode`; eebench.methods.protocols.Decodes),
computed here and nowhere else, as eebench.methods.derived does for every method:

    what it decodes      decodings ("greedy" and/or "teacher-forced": the hooks it implements),
                         decoder_tasks, encoder_tasks (False: a decoder method only),
                         decoder_methods (the registered ones, for a task)
    in a run             decoder_refusal (a run it has no points in), decoder_points,
                         timed_decodes (its real decodes to time), decodes_batches
    refusals             refuse_across (a decoder task, or a decoder method on an encoder one)

A method declares `encoder_tasks = False`, `decodes_batches = True`, `def decoder_refusal(self,
cfg)` or `def timed_decodes(self, ctx, point)` where it differs from the default.
"""

from __future__ import annotations

from typing import Any

from eebench.errors import UsageError
from eebench.methods.catalog import METHODS
from eebench.methods.declared import own
from eebench.methods.protocols import DecodesGreedy, DecodesTeacherForced
from eebench.models.units import GENERATED


def decodings(m: Any) -> tuple[str, ...]:
    """The decodings it has points for (a class or an instance): "greedy", "teacher-forced"."""
    cls = m if isinstance(m, type) else type(m)
    return (("greedy",) if issubclass(cls, DecodesGreedy) else ()) + (
        ("teacher-forced",) if issubclass(cls, DecodesTeacherForced) else ())


def decoder_tasks(m: Any) -> list[str]:
    """The decoder tasks it does: those whose decoding it has points for."""
    from eebench.tasks.catalog import all_tasks

    return [t.name for t in all_tasks() if t.unit == GENERATED.name and t.decoding in
            decodings(m)]


def encoder_tasks(m: Any) -> bool:
    return own(m, "encoder_tasks", True)  # False: a decoder method only (self-spec, CALM)


def decoder_methods(task: str | None = None) -> list[str]:
    """The registered decoder methods (that do `task`), in registry order."""
    return [n for n in METHODS.names() if decodings(METHODS.get(n))
            and (task is None or task in decoder_tasks(METHODS.get(n)))]


def refuse_across(m: Any, name: str, unit: str) -> None:
    """Refuse a decoder task (`eebench decode` runs those) or, for a decoder method, an encoder
    task, saying which command does what (eebench.methods.derived.check_unit)."""
    if unit == GENERATED.name:
        fit = m.name in decoder_methods(name)
        raise UsageError(f"task {name!r} is a decoder task: `eebench decode` runs it (`eebench "
                         "run` trains and sweeps encoder methods)",
                         hint=f"eebench decode --task {name}" + (f" --method {m.name}" if fit
                         else f"; its methods: {', '.join(decoder_methods(name))}"))
    if decodings(m) and not encoder_tasks(m):
        raise UsageError(f"method {m.name!r} is a decoder method: `eebench decode` runs it on "
                         f"{', '.join(decoder_tasks(m))} (`eebench run` trains and sweeps "
                         "encoder methods)", hint=f"eebench decode --method {m.name}; "
                         "`eebench methods` lists the tasks of each")


def decoder_refusal(m: Any, cfg: Any) -> str | None:
    """Why decoder run `cfg` (a DecodeConfig) can have no points of `m`: a task it does not do,
    exits it does not fit (its own `decoder_refusal(cfg)`); None: it can."""
    if cfg.task not in decoder_tasks(m):
        return (f"{m.name} does not do {cfg.task}; it does "
                f"{', '.join(decoder_tasks(m)) or 'no decoder task'}")
    hook = own(m, "decoder_refusal")
    return hook(cfg) if hook is not None else None


def decoder_points(m: Any, ctx: Any) -> list[Any]:
    """Its points in a decoder run (`ctx`: eebench.methods.decoding.DecodeContext): its
    `greedy_points` or `teacher_points`, by the run's decoding."""
    if ctx.decoding not in decodings(m):
        raise UsageError(f"method {m.name!r} has no {ctx.decoding} points",
                         hint=f"it does {', '.join(decoder_tasks(m)) or 'no decoder task'}")
    return m.greedy_points(ctx) if ctx.decoding == "greedy" else m.teacher_points(ctx)


def timed_decodes(m: Any, ctx: Any, point: Any) -> dict[str, Any]:
    """Its real decodes of `point` to time, by the point's field ("timing", "peer_timing"):
    each `decode(prompt) -> tokens`; none by default."""
    hook = own(m, "timed_decodes")
    return hook(ctx, point) if hook is not None else {}


def decodes_batches(m: Any) -> bool:
    """Whether its decoding can run a batch above 1 (its own `decodes_batches`; default no)."""
    return bool(own(m, "decodes_batches", False))
