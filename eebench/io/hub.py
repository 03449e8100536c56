"""Whether the Hugging Face hub can be reached: a load by hub id fails in one line, in seconds,
where it cannot."""

from __future__ import annotations

import os
import socket
from urllib.parse import urlparse

HUB_PROBE_TIMEOUT_S = 3.0
_OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
_PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")


def hub_offline_mode() -> bool:
    """The user said offline (HF_HUB_OFFLINE and its datasets/transformers twins)."""
    return any(os.environ.get(n, "").strip().upper() in {"1", "ON", "YES", "TRUE"}
               for n in _OFFLINE_VARIABLES)


def hub_unreachable() -> str | None:
    """The hub's host when it cannot be reached within a few seconds, else None, so that a load
    fails in seconds rather than after the hub client's retry loop. Behind a proxy the answer is
    None: the proxy may reach what a direct connection cannot."""
    if any(os.environ.get(v) for v in _PROXY_VARIABLES):
        return None
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    host, port = url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)
    try:
        socket.create_connection((host, port), timeout=HUB_PROBE_TIMEOUT_S).close()
    except OSError:
        return host
    return None
