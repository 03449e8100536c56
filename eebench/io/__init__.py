"""Shared input and output: files written whole or not at all and read back with one-line errors,
content hashes (`eebench.io.files`), lock files taken one way (`eebench.io.locks`), and
whether the hub can be reached (`eebench.io.hub`)."""

from eebench.io.files import (
    HASH_CHUNK,
    MAX_READ_BYTES,
    AddedLater,
    Staging,
    atomic_files,
    atomic_path,
    atomic_write_text,
    config_hash,
    kind,
    left_out_at_default,
    not_a_directory,
    not_a_file,
    parse_json_text,
    read_bytes,
    read_json,
    read_model,
    read_text,
    regular_fd,
    sha256_file,
    validated,
    write_json,
)
from eebench.io.hub import HUB_PROBE_TIMEOUT_S, hub_offline_mode, hub_unreachable
from eebench.io.locks import held_elsewhere, locked, take_lock

__all__ = [
    "HASH_CHUNK", "HUB_PROBE_TIMEOUT_S", "MAX_READ_BYTES", "AddedLater", "Staging",
    "atomic_files", "atomic_path", "atomic_write_text", "config_hash", "held_elsewhere",
    "hub_offline_mode", "hub_unreachable", "kind", "left_out_at_default", "locked",
    "not_a_directory", "not_a_file", "parse_json_text", "read_bytes", "read_json", "read_model",
    "read_text", "regular_fd", "sha256_file", "take_lock", "validated", "write_json",
]
