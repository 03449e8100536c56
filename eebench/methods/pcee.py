"""PCEE-BERT (Zhang et al., NAACL Findings 2022; michael-wzhu/PCEE-BERT): patience counted over
confident exits.

    head i  = shared pooler (one module, from the pretrained pooler) -> dropout -> linear_i
    train:    loss = sum_i i * CE_i / sum_i i          (PABEE's weighting, the authors' default)
    infer:    counter = 0
              for i = 1..L:
                  if H(p_i) / ln C < threshold: counter += 1   else: counter = 0
                  if counter == patience: exit at layer i
              (the last layer always exits)

Unlike PABEE's counter, layer 1 can count (patience 1 exits at the first confident layer). The
sweep is a grid of (patience, threshold) pairs, each written as one number patience + threshold
(2.25: patience 2, threshold 0.25). Classification only.
"""

from __future__ import annotations

from typing import Literal

from eebench.methods.base import MethodSettings, register_method
from eebench.methods.pabee import PABEE


@register_method("pcee")
class PCEE(PABEE):
    paper = ("Zhang et al., PCEE-BERT: Accelerating BERT Inference via Patient and Confident "
             "Early Exiting, NAACL Findings 2022")
    description = ("PABEE's heads and weighted loss; exit after `patience` consecutive "
                   "confident exits (normalised entropy < threshold)")
    rule = "confident-patience"

    class Settings(MethodSettings):  # PABEE's, less its regression threshold (no regression)
        loss_weights: Literal["layer", "equal", "descending"] = "layer"
        shared_pooler: bool = True
