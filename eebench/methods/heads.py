"""A method's exit heads, by default: one head per layer, each pooler -> dropout -> linear on its
own copy of the pretrained pooler. A method changes only what differs: where its heads sit
(`head_layers`), or all of `build_heads`; or, read by the default `build_heads`, the optional
hooks `shares_pooler` (a method or a bool: one pooler for every exit), `make_head(pooler, config,
num_labels, own_pooler)` (what one head is) and `make_token_head(config, num_labels)`.

A method whose `unit` setting is "token" (sequence labelling; the runner sets it from the task)
has a token head at each of its exits instead: dropout -> linear on every token's hidden state,
no pooler (eebench.models.token_heads). Where the heads sit stays the method's: DeeBERT's token
model is a token head after every layer, trained in DeeBERT's two stages."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch stays out of `eebench --help`
    from torch import nn

    from eebench.models.multi_exit import ExitHeads


class HeadDefaults:
    """The heads part of EarlyExitMethod."""

    config: Any  # the method's settings (its `unit`)

    @property
    def unit(self) -> str:
        """What one exit classifies: "sequence" (a text) or "token" (each token)."""
        return self.config.unit

    def head_layers(self, num_layers: int) -> tuple[int, ...]:
        """The layers with an exit after them (1-based) on a backbone of `num_layers` layers:
        every one, by default. The model keeps the layers up to the last of them."""
        return tuple(range(1, num_layers + 1))

    def build_heads(self, config: Any, num_labels: int, num_layers: int, pooler: nn.Module
                    ) -> ExitHeads:
        """Exit heads for a backbone of `num_layers` layers: a head (`make_head`) after each of
        `head_layers`, on a copy of `pooler` each or on one shared copy (`shares_pooler`).
        `pooler` already pools the model's way ([CLS] or masked mean), from the pretrained
        pooler where the checkpoint has one."""
        import copy

        from torch import nn

        from eebench.methods.derived import shares_pooler
        from eebench.models.multi_exit import ExitHeads
        from eebench.models.units import unit_of

        layers = self.head_layers(num_layers)
        if unit_of(self.unit).per_token:  # a tag per token at every exit: no pooler
            make_token = getattr(self, "make_token_head", token_head)
            return ExitHeads(nn.ModuleList(make_token(config, num_labels) for _ in layers),
                             layers)
        make = getattr(self, "make_head", exit_head)
        shared = copy.deepcopy(pooler) if shares_pooler(self) else None
        heads = [make(copy.deepcopy(pooler) if shared is None else shared, config, num_labels,
                      own_pooler=shared is None or i == 0) for i in range(len(layers))]
        return ExitHeads(nn.ModuleList(heads), layers)


def exit_head(pooler: nn.Module, config: Any, num_labels: int, own_pooler: bool) -> nn.Module:
    """One exit's head: pooler -> dropout -> linear (eebench.models.multi_exit.ExitHead)."""
    from eebench.models.multi_exit import ExitHead

    return ExitHead(pooler, config, num_labels, own_pooler=own_pooler)


def token_head(config: Any, num_labels: int) -> nn.Module:
    """One exit's head of a token model: dropout -> linear on every token's hidden state."""
    from eebench.models.token_heads import TokenExitHead

    return TokenExitHead(config, num_labels)
