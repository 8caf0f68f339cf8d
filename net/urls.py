"""Checking the URLs a user gives (relays, store peers, NATS servers) before using them.

A prefix test let through URLs that can never connect (``ws://host:99999``,
``ws://[::1``, ``ws://``): the node then retried them forever. Checked here,
they are a usage error (exit 2) that names the flag. One checker for every
kind (:func:`check_url`); :func:`check_ws_url` and :func:`check_nats_url`
name the schemes. :func:`redact_url` hides the secrets a NATS URL may carry
before it is logged.
"""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["check_nats_url", "check_url", "check_ws_url", "display_address", "redact_url"]


def check_url(url: str, what: str, schemes: tuple[str, ...], expected: str) -> str:
    """Return ``url`` if it has one of ``schemes``, a host and a port that can be connected to.

    Args:
        url: what the user gave.
        what: the flag or setting, for the message (``"--relay"``).
        schemes: the accepted schemes, without ``://``.
        expected: how the message describes a good URL (``"a ws:// or wss:// URL"``).

    Raises:
        ValueError: naming ``what`` and saying what is wrong.
    """
    if not isinstance(url, str) or not url.startswith(tuple(f"{s}://" for s in schemes)):
        raise ValueError(f"{what} must be {expected}, got {redact_url(url)!r}")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"{what} {redact_url(url)!r} is not a valid URL: {exc}") from None
    if not parts.hostname:
        raise ValueError(f"{what} {redact_url(url)!r} names no host")
    if port == 0:
        raise ValueError(f"{what} {redact_url(url)!r}: port 0 cannot be connected to")
    return url


def check_ws_url(url: str, what: str) -> str:
    """Return ``url`` if it is a usable ``ws://`` or ``wss://`` URL (else ValueError)."""
    return check_url(url, what, ("ws", "wss"), "a ws:// or wss:// URL")


def check_nats_url(url: str, what: str = "--cluster") -> str:
    """Return ``url`` if it is a usable ``nats://HOST:PORT`` (or ``tls://``) URL, possibly
    with ``USER:PASSWORD@`` or ``TOKEN@`` before the host (else ValueError)."""
    return check_url(url, what, ("nats", "tls"), "a nats://HOST:PORT URL")


def redact_url(url: object) -> str:
    """``nats://relay:***@host:4222`` for ``nats://relay:secret@host:4222``; a lone user
    part (a NATS token) becomes ``***``. Anything else is returned as it is."""
    text = str(url)
    head, sep, rest = text.partition("://")
    if not sep:
        return text
    authority, slash, path = rest.partition("/")
    if "@" not in authority:
        return text
    userinfo, _, host = authority.rpartition("@")
    user, colon, _ = userinfo.partition(":")
    hidden = f"{user}:***" if colon else "***"
    return f"{head}://{hidden}@{host}{slash}{path}"


def display_address(url: str) -> str:
    """``127.0.0.1:8765`` for ``ws://127.0.0.1:8765/``: what status lines show of a URL."""
    return urlsplit(url).netloc or url
