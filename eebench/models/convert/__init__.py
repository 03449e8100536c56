"""Early-exit checkpoints made elsewhere, as eebench's multi-exit model: the authors' released
DeeBERT, PABEE and ElasticBERT checkpoints, and eebench's own exported models.

- formats.py  the authors' state-dict keys, renamed onto eebench's backbone and exit heads
- source.py   a folder or hub id: config.json, safetensors weights (never a pickle), sha256
- schema.py   what the folder must hold before anything is built: the config by its schema and
              against the weights' shapes, the early_exit block, the tokenizer
- build.py    the backbone loaded by its family's class, the method's heads filled strictly
- export.py   the other way: an eebench model under its family's own keys (transformers loads
              the backbone without custom code) and its heads under `exit_heads.`
"""

from eebench.models.convert.formats import FORMATS
from eebench.models.convert.source import CheckpointSource, open_checkpoint

__all__ = ["FORMATS", "CheckpointSource", "open_checkpoint"]
