"""A network namespace of the test's own, linked to this one by a veth pair, that a test
cuts off and heals (its end of the link set down, then up: this machine's kernel has
no ``tc`` netem or filters, so a partition is the link lost, as when a cable is pulled).

Only the namespace and the two ends of its link are touched (all made here, all
removed in :meth:`Namespace.close`); addresses are from 10.213.0.0/16, on that link
only. Nothing is sent anywhere else. Needs root (``ip``).
"""

from __future__ import annotations

import secrets
import shutil
import subprocess

__all__ = ["Namespace", "available"]


def available() -> bool:
    """Whether this process may make namespaces (root, with ``ip`` and ``tc``)."""
    import os

    return os.geteuid() == 0 and shutil.which("ip") is not None


def _ip(*args: str, ns: str | None = None) -> None:
    argv = ["ip", *args] if ns is None else ["ip", "netns", "exec", ns, "ip", *args]
    subprocess.run(argv, check=True, capture_output=True, timeout=30)


class Namespace:
    """``sdsjs-XXXX``: ``inner`` is its address, ``outer`` the address of this namespace's
    end of the link (both on a /30 of their own)."""

    def __init__(self) -> None:
        tag = secrets.token_hex(3)
        self.name = f"sdsjs-{tag}"
        self.outer_dev, self.inner_dev = f"sjo{tag}", f"sji{tag}"
        third, fourth = secrets.randbelow(256), secrets.randbelow(64) * 4
        self.outer = f"10.213.{third}.{fourth + 1}"
        self.inner = f"10.213.{third}.{fourth + 2}"
        self._made: list[str] = []
        try:
            _ip("netns", "add", self.name)
            self._made.append("ns")
            _ip("link", "add", self.outer_dev, "type", "veth", "peer", "name", self.inner_dev)
            self._made.append("link")
            _ip("link", "set", self.inner_dev, "netns", self.name)
            _ip("addr", "add", f"{self.outer}/30", "dev", self.outer_dev)
            _ip("link", "set", self.outer_dev, "up")
            _ip("addr", "add", f"{self.inner}/30", "dev", self.inner_dev, ns=self.name)
            _ip("link", "set", self.inner_dev, "up", ns=self.name)
            _ip("link", "set", "lo", "up", ns=self.name)
        except BaseException:
            self.close()
            raise
        self.cut_off = False

    def exec(self, argv: list[str]) -> list[str]:
        """``argv`` to run inside the namespace."""
        return ["ip", "netns", "exec", self.name, *argv]

    def cut(self) -> None:
        """Take the namespace's end of the link down: nothing crosses it either way (this
        side's address stays reachable from this side)."""
        _ip("link", "set", self.inner_dev, "down", ns=self.name)
        self.cut_off = True

    def heal(self) -> None:
        _ip("link", "set", self.inner_dev, "up", ns=self.name)
        self.cut_off = False

    def close(self) -> None:
        if "link" in self._made:
            subprocess.run(["ip", "link", "del", self.outer_dev], capture_output=True,
                           timeout=30, check=False)  # fmt: skip
        if "ns" in self._made:
            subprocess.run(["ip", "netns", "del", self.name], capture_output=True, timeout=30,
                           check=False)  # fmt: skip
        self._made.clear()

    def __enter__(self) -> Namespace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
