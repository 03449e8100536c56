"""Hostile input, command by command: every expected failure is one line and an exit code, and
leaves nothing written or changed (docs/reliability.md)."""
