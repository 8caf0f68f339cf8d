"""Real processes over loopback: a relay and headless nodes, started and always killed by PID.

Every wait is bounded by :func:`T` (base seconds times ``SDSCHAT_TEST_TIMEOUT_SCALE``).
Everything binds or connects to 127.0.0.1 only. The process machinery is
:mod:`tests.procs`, shared with the store and LAN tests.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from tests import procs
from tests.procs import ROOT, Proc, T, comparable, free_port, history

__all__ = [
    "ROOT",
    "Cluster",
    "Proc",
    "T",
    "cluster",
    "comparable",
    "free_port",
    "history",
    "log_count",
    "stdin_of",
    "write_lines_paced",
]


class Cluster(procs.Cluster):
    """The e2e cluster: nodes always talk through a relay given by URL."""

    def node(
        self,
        name: str,
        url: str,
        *,
        channel: str = "room",
        data_dir: Path | None = None,
        extra: list[str] | None = None,
        label: str | None = None,
    ) -> Proc:
        """Start a headless node with fast timings; its data dir defaults to tmp/<name>."""
        return self.headless(
            name, data_dir or self.tmp / name, channel=channel, relay=url, extra=extra,
            label=label,
        )


@contextlib.contextmanager
def cluster(tmp: Path) -> Iterator[Cluster]:
    with procs.running(Cluster(tmp)) as c:
        yield c


def log_count(p: Proc) -> int:
    """Messages in the node's log according to its events (own logged + delivered)."""
    return len(p.select("own", state="logged")) + len(p.select("delivered"))


def write_lines_paced(p: Proc, lines: list[str], per_second: float) -> None:
    """Type ``lines`` into ``p`` at about ``per_second``."""
    gap = 1.0 / per_second
    for line in lines:
        p.send(line)
        time.sleep(gap)


def stdin_of(p: Proc) -> IO[bytes]:
    assert p.popen.stdin is not None
    return p.popen.stdin
