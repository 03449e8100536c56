"""FLOPs of one module at one token length, counted twice: by fvcore and by torch.

Why per module: an early-exit model runs a different path for every sample, and a trace records
only the one path it happened to take. So each piece (embeddings, a layer, an exit head) is counted
on its own, at batch 1 and a real token length n (no padding); eebench.measure.cost_table turns
those counts into a table over n, and a sample's FLOPs are the sum along its executed path.

An exit head's inputs are the hidden states [1, n, d] and the 2-D attention mask [1, n]: a head
that mean-pools reads every token (its multiply by the mask and its divide are element-wise work,
0 FLOPs under mac2-matmul), a head on [CLS] reads one, and its cost does not depend on n.

Each piece is counted twice, by fvcore (`FlopCountAnalysis`, a JIT trace of the one module) and by
torch (`FlopCounterMode`, dispatch level); the two must agree exactly, which catches an op that
one of them silently skips (SDPA attention is such a gap, so attention is counted in eager mode).
See docs/flops.md for the conventions.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from eebench.errors import EebenchError, UsageError
from eebench.models.families import LayerInputs

DEFAULT_CONVENTION = "mac2-matmul"
CONVENTIONS: dict[str, str] = {
    "mac2-matmul": "matrix multiplications (linear layers, QK^T, AV) at 2 FLOPs per multiply-add; "
                   "embedding lookups, norms, softmax and activations count 0",
    "mac2-all": "mac2-matmul plus element-wise work: 1 FLOP per output element of add/sub/mul/div "
                "and activations, 3 per element of a softmax, 5 per element of a layer norm",
    "elue": "what ElasticBERT's counter counts (fastnlp/ElasticBERT FLOPs/flops_counter.py): "
            "mac2-matmul plus 4 FLOPs per element of every layer norm and 4 per attention score "
            "(2 for the 1/sqrt(d) scaling, 2 for the softmax)",
}


# -- the two counters ------------------------------------------------------------------------------
# fvcore counts 1 per multiply-add: its matmul handles are doubled to match FlopCounterMode.
_FV_MATMUL = ("aten::addmm", "aten::bmm", "aten::matmul", "aten::mm", "aten::linear",
              "aten::einsum", "aten::_convolution")
# Ops that do matmul-like work no handle above covers: refuse rather than skip them silently.
_FV_MUST_COUNT = {f"aten::{op}" for op in ("scaled_dot_product_attention", "baddbmm", "addbmm",
                                           "addmv", "mv", "dot", "bilinear", "conv1d", "conv2d")}

# FLOPs per output element on top of the matmuls, by convention and op name (JIT name without
# "aten::", dispatch packet name).
_ELEMENTWISE_COST: dict[str, dict[str, int]] = {
    "mac2-matmul": {},
    "mac2-all": {
        **dict.fromkeys(("add", "add_", "sub", "sub_", "rsub", "mul", "mul_", "div", "div_"), 1),
        **dict.fromkeys(("gelu", "tanh", "relu", "relu_", "sigmoid", "silu", "erf", "exp"), 1),
        "softmax": 3, "_softmax": 3, "log_softmax": 3, "_log_softmax": 3,  # exp, sum, divide
        "layer_norm": 5, "native_layer_norm": 5,  # mean, variance, normalise, scale, shift
    },
    # ElasticBERT's counter (ptflops-based, FLOPs/flops_counter.py) counts MACs and reports
    # 2 x MACs: an nn.LayerNorm with affine weights 2 MACs per element, and in a BERT-style
    # self-attention n^2 per head for the scaling and n^2 for the softmax besides QK^T and AV.
    # Every attention score is scaled once and softmaxed once (whether a model scales the scores
    # or the queries), so both ride on the softmax: 2 x (1 + 1) per score.
    "elue": {"softmax": 4, "_softmax": 4, "layer_norm": 4, "native_layer_norm": 4},
}
_JIT_ONLY = ("native_layer_norm", "_softmax", "_log_softmax")  # dispatch names, not in a trace
_DISPATCH_ONLY = ("layer_norm", "softmax", "log_softmax")  # composite: decomposed before dispatch


def _detached(inputs: tuple) -> tuple:
    """Inputs cut from autograd: counting is inference, and module hooks trip over grad inputs."""
    return tuple(x.detach() if isinstance(x, torch.Tensor) else x for x in inputs)


def check_convention(convention: str) -> None:
    if convention not in CONVENTIONS:
        raise UsageError(f"unknown FLOPs convention {convention!r}",
                         hint=f"choose from: {', '.join(CONVENTIONS)}")


def _numel(shape: Any) -> int:
    """Elements of an op's output; a scalar (0-dim: size arithmetic in a trace) counts 0."""
    return int(np.prod(shape)) if shape else 0


def _fv_elementwise(per_element: int) -> Callable[[list, list], int]:
    from fvcore.nn.jit_handles import get_shape

    def handle(inputs: list, outputs: list) -> int:
        return per_element * _numel(get_shape(outputs[0]))  # a scalar (int) output has no shape

    return handle


def _fv_doubled(handle: Callable[[list, list], Any]) -> Callable[[list, list], int]:
    return lambda inputs, outputs: 2 * int(handle(inputs, outputs))


def fvcore_flops(fn: Callable[..., Any], inputs: tuple, convention: str = DEFAULT_CONVENTION,
                 owner: nn.Module | None = None) -> int:
    """FLOPs of `fn(*inputs)` counted by fvcore's FlopCountAnalysis, configured to `convention`.

    `owner` is the module whose parameters `fn` uses (a trace must see them as parameters); a
    module or a bound method of one needs none.
    """
    with warnings.catch_warnings():  # importing fvcore scripts a loss: a DeprecationWarning
        warnings.simplefilter("ignore", DeprecationWarning)
        from fvcore.nn import FlopCountAnalysis
        from fvcore.nn.flop_count import _DEFAULT_SUPPORTED_OPS

    check_convention(convention)
    analysis = FlopCountAnalysis(_Call(fn, owner), _detached(inputs))
    handles = {op: _fv_doubled(_DEFAULT_SUPPORTED_OPS[op]) for op in _FV_MATMUL}
    handles.update({f"aten::{name}": _fv_elementwise(cost)
                    for name, cost in _ELEMENTWISE_COST[convention].items()
                    if name not in _JIT_ONLY})
    analysis.clear_op_handles().set_op_handle(**handles)  # no norms, pools, ... by default
    analysis.unsupported_ops_warnings(False).uncalled_modules_warnings(False)
    analysis.tracer_warnings("none")
    total = int(analysis.total())
    missed = sorted(set(analysis.unsupported_ops()) & _FV_MUST_COUNT)
    if missed:
        raise EebenchError(f"FLOPs: fvcore cannot count {missed[0]}",
                           hint="count FLOPs with eager attention (attn_implementation='eager')")
    return total


def _torch_elementwise(per_element: int) -> Callable[..., int]:
    def formula(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
        if isinstance(out_shape, tuple) and out_shape and not isinstance(out_shape[0], int):
            out_shape = out_shape[0]  # native_layer_norm returns (out, mean, rstd)
        return per_element * _numel(out_shape)

    return formula


def torch_flops(fn: Callable[..., Any], inputs: tuple, convention: str = DEFAULT_CONVENTION
                ) -> int:
    """FLOPs of `fn(*inputs)` counted by torch's FlopCounterMode (2 per multiply-add already)."""
    from torch.utils.flop_counter import FlopCounterMode

    check_convention(convention)
    aten = torch.ops.aten
    mapping = {getattr(aten, name): _torch_elementwise(cost)
               for name, cost in _ELEMENTWISE_COST[convention].items()
               if name not in _DISPATCH_ONLY}
    with torch.no_grad(), FlopCounterMode(display=False, custom_mapping=mapping) as counter:
        fn(*_detached(inputs))
    return int(counter.get_total_flops())


def count_flops(fn: Callable[..., Any], inputs: tuple, convention: str = DEFAULT_CONVENTION,
                owner: nn.Module | None = None) -> int:
    """FLOPs of `fn(*inputs)`, counted by fvcore and cross-checked by FlopCounterMode."""
    fv = fvcore_flops(fn, inputs, convention, owner)
    tc = torch_flops(fn, inputs, convention)
    if fv != tc:
        raise EebenchError(f"FLOPs counters disagree under {convention}: fvcore {fv:,} vs "
                           f"torch {tc:,}", hint="count with eager attention; see docs/flops.md")
    return fv


class _Call(nn.Module):
    """fvcore analyses a module: wrap a bound call (e.g. `model.layer(i, ...)`) in one."""

    def __init__(self, fn: Callable[..., Any], owner: nn.Module | None = None):
        super().__init__()
        self.fn = fn
        if owner is None and isinstance(getattr(fn, "__self__", None), nn.Module):
            owner = fn.__self__
        if owner is not None and owner is not fn:
            self.owner = owner  # registered, so the trace sees its parameters as parameters

    def forward(self, *inputs: Any) -> Any:
        out = self.fn(*inputs)
        if isinstance(out, tuple):  # a trace returns tensors only: not None, not LayerInputs
            return tuple(t for x in out for t in (
                x.values() if isinstance(x, LayerInputs) else (x,)) if isinstance(t, torch.Tensor))
        return out


def layer_piece(model: nn.Module, i: int, hidden: torch.Tensor, inputs: Any
                ) -> tuple[Callable[..., Any], tuple]:
    """(function of tensors, tensors) that runs `model.layer(i, hidden, inputs)`: a trace takes
    tensors, so the layer inputs travel as their tensors and are put back together inside."""
    if isinstance(inputs, LayerInputs):
        return ((lambda h, *ts: model.layer(i, h, inputs.with_values(ts))),
                (hidden, *inputs.values()))
    if inputs is None:
        return (lambda h: model.layer(i, h, None)), (hidden,)
    return (lambda h, m: model.layer(i, h, m)), (hidden, inputs)
