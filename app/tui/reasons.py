"""Why the relay cannot be reached, said to a person: what is wrong and what to do.

The relay client reports low-level reasons (``unreachable: [Errno 111] Connect
call failed ('127.0.0.1', 8765)``, ``unreachable: ConnectionResetError``) that are
right for logs and the headless JSON, not for a notification. :func:`explain`
turns the usual ones into a sentence; anything it does not know is shown as it
came, so nothing is hidden.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

__all__ = ["explain"]

_REFUSED = re.compile(r"Errno 111\b|Connection refused|Connect call failed", re.IGNORECASE)
_NO_NAME = re.compile(
    r"Errno -[235]\b|Name or service not known|nodename nor servname|getaddrinfo failed|"
    r"Temporary failure in name resolution",
    re.IGNORECASE,
)
_NO_ROUTE = re.compile(r"Errno (101|113)\b|unreachable network|No route to host", re.IGNORECASE)
_RESET = re.compile(r"ConnectionResetError|Errno 104\b|Connection reset", re.IGNORECASE)
_TLS = re.compile(r"SSL|TLS|WRONG_VERSION_NUMBER|record layer|certificate", re.IGNORECASE)
_NOT_WS = re.compile(r"handshake failed|did not receive a valid HTTP|invalid HTTP", re.IGNORECASE)


def explain(reason: str | None, url: str | None) -> str:
    """A person's sentence for a relay ``reason`` (``url``: the relay's ws:// or wss:// URL)."""
    if not reason:
        return "no answer"
    parts = urlsplit(url or "")
    where = parts.netloc or "the relay"
    tls = parts.scheme == "wss"
    if _REFUSED.search(reason):
        return (
            f"nothing is listening at {where}: is the relay running there "
            "(sdschat relay --host ... --port ...)? Check the --relay address and port"
        )
    if _NO_NAME.search(reason):
        return f"the host name in {url or where} cannot be found: check the --relay address"
    if _NO_ROUTE.search(reason):
        return f"no route to {where}: check the network and the --relay address"
    if tls and (_RESET.search(reason) or _TLS.search(reason)):
        return (
            f"{where} closed the connection during the TLS handshake: it probably is a "
            f"plain relay. Use ws://{where} instead of wss://, or run the relay with a "
            "certificate"
        )
    if not tls and _TLS.search(reason):
        return f"{where} expects TLS: use wss://{where} instead of ws://"
    if _NOT_WS.search(reason):
        hint = "" if tls else f" (if it is a TLS relay, use wss://{where})"
        return f"{where} did not answer as an sdschat relay{hint}: check the --relay URL"
    if _RESET.search(reason):
        return f"{where} closed the connection (the relay stopped, or a proxy cut it)"
    if "timed out" in reason:
        return (
            f"{where} does not answer (timed out): is the address right, is a firewall "
            "in the way?"
        )
    return reason.removeprefix("unreachable: ")
