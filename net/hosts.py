"""What a relay and a store peer count as one host, and which host names are loopback.

**Hosts.** Per-host limits (``--max-clients-per-ip`` of the relay and of the store
peer, the store's attribution of ``Put`` frames) count networks, not addresses,
because addresses are what an attacker has many of:

* an IPv4 address counts as its /24 (``--ipv4-host-prefix``, default 24): one
  provider customer, one cloud tenant or one NAT pool rarely spans less, and 20
  addresses of one /24 are then one host, not 20;
* all of ``127.0.0.0/8`` is one host, whatever the prefix: every address in it
  is this machine (Linux answers on the whole /8 without configuration);
* an IPv6 address counts as its /64 (``--ipv6-host-prefix``, default 64): the
  block one link or one customer is given, whose 2**64 addresses cost nothing;
  an IPv4-mapped IPv6 address (``::ffff:a.b.c.d``) counts as its IPv4 address;
* anything that is not an IP address (a Unix socket, ``"?"``) is its own host.

A shorter prefix counts more clients as one host (fewer slots for an attacker
with a block of addresses, and for the honest users sharing it); 32 and 128
count single addresses.

**Loopback.** :func:`is_loopback_host` says whether a host *name as written* (in
a URL) is certainly this machine: an IP literal in ``127.0.0.0/8``, ``::1``, or
exactly ``localhost``. A name that merely begins with ``127.``
(``127.0.0.1.nip.io``) is a DNS name that may resolve anywhere.

Stdlib only (``ipaddress``), so ``sdschat --help`` stays fast.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

__all__ = [
    "DEFAULT_IPV4_PREFIX",
    "DEFAULT_IPV6_PREFIX",
    "LOOPBACK_V4",
    "HostGrouping",
    "host_group",
    "is_loopback_host",
]

DEFAULT_IPV4_PREFIX = 24
"""IPv4 prefix length counted as one host by default."""

DEFAULT_IPV6_PREFIX = 64
"""IPv6 prefix length counted as one host by default."""

LOOPBACK_V4 = ipaddress.IPv4Network("127.0.0.0/8")
"""This machine's IPv4 addresses: one host, whatever the prefix."""


def _check_prefix(name: str, value: int, most: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise ValueError(f"{name} must be a prefix length from 1 to {most}, got {value!r}")


@dataclass(frozen=True, slots=True)
class HostGrouping:
    """How addresses are grouped into hosts (see the module docstring).

    Attributes:
        ipv4_prefix: IPv4 prefix length of one host (1 to 32).
        ipv6_prefix: IPv6 prefix length of one host (1 to 128).

    Raises:
        ValueError: a prefix out of range (the message names it).
    """

    ipv4_prefix: int = DEFAULT_IPV4_PREFIX
    ipv6_prefix: int = DEFAULT_IPV6_PREFIX

    def __post_init__(self) -> None:
        _check_prefix("ipv4_host_prefix", self.ipv4_prefix, 32)
        _check_prefix("ipv6_host_prefix", self.ipv6_prefix, 128)

    def group(self, ip: str) -> str:
        """The host ``ip`` belongs to, as a network in CIDR form (``203.0.113.0/24``,
        ``127.0.0.0/8``, ``2001:db8:1:2::/64``); ``ip`` itself if it is no IP address."""
        try:
            addr = ipaddress.ip_address(ip.split("%", 1)[0])
        except ValueError:
            return ip
        if isinstance(addr, ipaddress.IPv6Address):
            if addr.ipv4_mapped is None:
                return str(ipaddress.IPv6Network((addr, self.ipv6_prefix), strict=False))
            addr = addr.ipv4_mapped
        if addr in LOOPBACK_V4:
            return str(LOOPBACK_V4)
        return str(ipaddress.IPv4Network((addr, self.ipv4_prefix), strict=False))


_DEFAULT = HostGrouping()


def host_group(ip: str, grouping: HostGrouping = _DEFAULT) -> str:
    """The host of ``ip`` under ``grouping`` (default: IPv4 /24, IPv6 /64)."""
    return grouping.group(ip)


def is_loopback_host(host: str) -> bool:
    """Whether ``host``, as written in a URL (brackets allowed around IPv6), is this
    machine for certain: an IP literal in ``127.0.0.0/8``, ``::1``, or ``localhost``.

    Host names are compared as DNS compares them (case-insensitively); nothing is
    resolved, so ``127.0.0.1.nip.io`` or ``localhost.example.org`` are not loopback.
    """
    text = host.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if text.lower() == "localhost":
        return True
    try:
        addr = ipaddress.ip_address(text)
    except ValueError:
        return False
    if isinstance(addr, ipaddress.IPv6Address):
        return addr == ipaddress.IPv6Address("::1")
    return addr in LOOPBACK_V4
