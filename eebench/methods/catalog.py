"""The registry of methods, `METHODS`, and eebench's own entries in it (one file each, imported
when first looked up). Apart from eebench.methods.base, which re-exports it, so that what is
derived from methods (eebench.methods.derived: which methods do a task) reads it without
importing the base class; the base class sets what a plugin's entry must be (`expects`)."""

from __future__ import annotations

from typing import Any

from eebench.registry import Lazy, Registry

METHODS: Registry[Any] = Registry("method", entry_point_group="eebench.methods")

for _name, _ref in (("static", "static:Static"), ("deebert", "deebert:DeeBERT"),
                    ("pabee", "pabee:PABEE"), ("maxprob", "maxprob:MaxProb"),
                    ("fastbert", "fastbert:FastBERT"), ("berxit", "berxit:BERxiT"),
                    ("pcee", "pcee:PCEE"), ("elasticbert", "elasticbert:ElasticBERT"),
                    ("sweet", "sweet:SWEET"), ("cascade", "cascade:Cascade"),
                    ("sentee", "sentee:SENTEE"), ("tokee", "tokee:TOKEE"),
                    # a decoder LLM's (eebench decode; static does decoders too), in the
                    # order of a decoder run's table: the truncations first
                    ("ee-tuning", "ee_tuning:EETuning"), ("self-spec", "self_spec:SelfSpec"),
                    ("self-spec-adaptive", "self_spec_adaptive:AdaptiveSelfSpec"),
                    ("calm", "calm:CALM")):
    METHODS.add(_name, Lazy(f"eebench.methods.{_ref}"))
