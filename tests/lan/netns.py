"""Throwaway network namespaces on a private bridge, for multi-host LAN tests.

``with bridged_namespaces(3) as hosts:`` creates ``hub`` (holding bridge
``br0``) and one namespace per host, each with a veth whose other end is
enslaved to the bridge, addresses ``10.231.<k>.<i+1>/24``, IPv6 disabled, and
deletes every one of them on exit (also after failures). Nothing is created
in, or sent from, the machine's own namespace: traffic (zeroconf multicast
included) stays on that bridge. Names carry this process's pid so parallel
runs cannot collide.

:func:`netns_unavailable` says why the machine cannot do this (not root, no
``ip``, namespaces refused), for a test's ``skip`` reason.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["Host", "bridged_namespaces", "netns_unavailable"]


@dataclass(frozen=True)
class Host:
    """One namespace: its name and address; :meth:`wrap` runs a command inside it."""

    netns: str
    address: str

    def wrap(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.netns, *argv]


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=20)


def netns_unavailable() -> str | None:
    """``None`` if namespaces can be made here, else the reason."""
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns add); not root"
    if shutil.which("ip") is None:
        return "the 'ip' command (iproute2) is not installed"
    probe = f"sdsprobe{os.getpid()}"
    try:
        _ip("netns", "add", probe)
    except (subprocess.CalledProcessError, OSError) as exc:
        err = getattr(exc, "stderr", b"") or b""
        return f"cannot create a network namespace: {err.decode(errors='replace').strip() or exc}"
    with contextlib.suppress(subprocess.CalledProcessError, OSError):
        _ip("netns", "del", probe)
    return None


@contextlib.contextmanager
def bridged_namespaces(count: int) -> Iterator[list[Host]]:
    """``count`` hosts on one private bridge (see the module docstring)."""
    tag = f"sds{os.getpid() % 100000}"
    hub = f"{tag}hub"
    subnet = random.Random(os.getpid()).randrange(1, 250)
    created: list[str] = []
    hosts: list[Host] = []
    try:
        _ip("netns", "add", hub)
        created.append(hub)
        _ip("-n", hub, "link", "add", "br0", "type", "bridge")
        _ip("-n", hub, "link", "set", "br0", "up")
        for i in range(count):
            name = f"{tag}h{i}"
            _ip("netns", "add", name)
            created.append(name)
            for ns in (name, hub):
                subprocess.run(
                    ["ip", "netns", "exec", ns, "sysctl", "-qw",
                     "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"],
                    check=False, capture_output=True, timeout=20,
                )
            _ip("link", "add", "eth0", "netns", name, "type", "veth", "peer", "name", f"p{i}",
                "netns", hub)
            address = f"10.231.{subnet}.{i + 1}"
            _ip("-n", name, "addr", "add", f"{address}/24", "dev", "eth0")
            _ip("-n", name, "link", "set", "lo", "up")
            _ip("-n", name, "link", "set", "eth0", "up")
            _ip("-n", hub, "link", "set", f"p{i}", "master", "br0")
            _ip("-n", hub, "link", "set", f"p{i}", "up")
            hosts.append(Host(name, address))
        yield hosts
    finally:
        for name in reversed(created):
            with contextlib.suppress(subprocess.CalledProcessError, OSError,
                                     subprocess.TimeoutExpired):
                _ip("netns", "del", name)
