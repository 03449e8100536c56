"""Multi-exit models over Hugging Face encoders: backbones (light) and the model (torch).

`build_model`, `load_tokenizer` and the exit-head classes are importable from here; each is
loaded on first use, so `import eebench.models` imports neither torch nor transformers.
"""

__all__ = ["ExitHead", "ExitHeads", "ExitPooler", "MultiExitModel", "build_model",
           "load_tokenizer"]

_WHERE = {"ExitHead": "multi_exit", "ExitHeads": "multi_exit", "ExitPooler": "multi_exit",
          "MultiExitModel": "multi_exit", "build_model": "build",
          "load_tokenizer": "backbones"}


def __getattr__(name):
    if name in _WHERE:
        from importlib import import_module

        return getattr(import_module(f"eebench.models.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'eebench.models' has no attribute {name!r}")
