"""eebench: benchmark toolkit for early-exit transformer classifiers, ELUE-style."""

__version__ = "0.1.0"
