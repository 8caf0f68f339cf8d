"""The client's address behind a reverse proxy: ``X-Forwarded-For`` from trusted proxies only.

A relay behind nginx, Caddy or HAProxy sees every connection come from the
proxy. The proxy appends the address it saw to ``X-Forwarded-For``; anything
to the left of that was written by whoever connected to it, so it proves
nothing. :func:`client_address` therefore reads the header only when the TCP
peer is a trusted proxy (``--trusted-proxy CIDR``), and walks it from the
right, skipping addresses of trusted proxies (a chain of them): the first
address that is not a trusted proxy is the client. A connection from anywhere
else keeps its TCP peer's address, whatever header it sends.

Stdlib only (``ipaddress``), so ``sdschat --help`` stays fast.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence

__all__ = ["Network", "client_address", "parse_networks"]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def parse_networks(cidrs: Iterable[str], what: str = "--trusted-proxy") -> tuple[Network, ...]:
    """``("10.0.0.0/8", "::1")`` -> networks; a bare address is a /32 (/128).

    Raises:
        ValueError: naming ``what`` and the value that is not an address or network.
    """
    out: list[Network] = []
    for text in cidrs:
        try:
            out.append(ipaddress.ip_network(str(text).strip(), strict=False))
        except ValueError:
            raise ValueError(
                f"{what} must be an IP address or network (10.0.0.0/8, ::1), got {text!r}"
            ) from None
    return tuple(out)


def _address(text: str) -> Address | None:
    """An address from a header entry or a socket (``1.2.3.4``, ``1.2.3.4:80``,
    ``[::1]:80``, ``::1``; IPv4-mapped IPv6 as IPv4); None if it is none."""
    text = text.strip().strip('"')
    if text.startswith("["):
        text = text[1 : text.find("]")] if "]" in text else ""
    elif text.count(":") == 1:
        text = text.split(":", 1)[0]  # IPv4 with a port
    text = text.split("%", 1)[0]  # IPv6 zone
    try:
        addr = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


def _trusted(addr: Address, trusted: Sequence[Network]) -> bool:
    return any(addr.version == net.version and addr in net for net in trusted)


def client_address(
    peer: str, forwarded_for: Iterable[str], trusted: Sequence[Network]
) -> tuple[str, bool]:
    """The client's address and whether it came from ``X-Forwarded-For``.

    Args:
        peer: the TCP peer's address (the socket's).
        forwarded_for: the values of every ``X-Forwarded-For`` header line, in order.
        trusted: the networks of trusted proxies.

    Returns:
        ``(peer, False)`` unless ``peer`` is a trusted proxy and the header names
        an address; then the rightmost address that is not a trusted proxy (or,
        if all are, the leftmost), and True. An entry that is not an address
        stops the walk: the address to its right (which a trusted proxy wrote)
        is the client.
    """
    if not trusted:
        return peer, False
    peer_addr = _address(peer)
    if peer_addr is None or not _trusted(peer_addr, trusted):
        return peer, False
    entries = [e for line in forwarded_for for e in line.split(",") if e.strip()]
    if not entries:
        return peer, False
    client = peer_addr
    for entry in reversed(entries):
        addr = _address(entry)
        if addr is None:
            break
        client = addr
        if not _trusted(addr, trusted):
            break
    if client == peer_addr:
        return peer, False
    return str(client), True
