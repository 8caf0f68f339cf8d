"""Checking the ws:// and wss:// URLs a user gives (relays, store peers) before using them.

A prefix test let through URLs that can never connect (``ws://host:99999``,
``ws://[::1``, ``ws://``): the node then retried them forever. Checked here,
they are a usage error (exit 2) that names the flag.
"""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["check_ws_url", "display_address"]


def check_ws_url(url: str, what: str) -> str:
    """Return ``url`` if it is a usable ``ws://`` or ``wss://`` URL.

    Raises:
        ValueError: naming ``what`` (e.g. ``"--relay"``) and saying what is wrong.
    """
    if not isinstance(url, str) or not url.startswith(("ws://", "wss://")):
        raise ValueError(f"{what} must be a ws:// or wss:// URL, got {url!r}")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"{what} {url!r} is not a valid URL: {exc}") from None
    if not parts.hostname:
        raise ValueError(f"{what} {url!r} names no host")
    if port == 0:
        raise ValueError(f"{what} {url!r}: port 0 cannot be connected to")
    return url


def display_address(url: str) -> str:
    """``127.0.0.1:8765`` for ``ws://127.0.0.1:8765/``: what status lines show of a URL."""
    return urlsplit(url).netloc or url
