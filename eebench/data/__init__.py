"""Tokenising a split once, and batching it (training order, evaluation order)."""
