"""Registers every command module with the app; the order here is the order in `--help`."""

from eebench.cli import data, info, methods, flops, train, run, decode, score, analyze, serve, plot, submit, export_model  # noqa: F401,I001,E501
