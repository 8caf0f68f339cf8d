"""Settings of ``sdschat relay`` and the command-line flags that set them.

This module is deliberately light (no websockets, no protobuf import) so that
``sdschat --help`` stays fast; the server itself lives in ``net/relay.py``.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, fields
from typing import Any
from urllib.parse import urlsplit

from net.relay_log import LogFormat

__all__ = [
    "DEFAULT_MAX_FRAME",
    "MAX_TOPIC_BYTES",
    "RelayConfig",
    "add_relay_arguments",
    "check_nats_url",
    "config_from_args",
]

DEFAULT_MAX_FRAME = 256 * 1024 + 1024
"""Largest websocket message accepted: one maximal envelope
(``net.envelope.MAX_ENVELOPE_BYTES`` = 256 KiB) plus 1 KiB of frame overhead."""

MAX_TOPIC_BYTES = 64
"""Longest topic a client may subscribe or publish to (sdschat topics are 16 bytes)."""


@dataclass(frozen=True)
class RelayConfig:
    """Everything that shapes a relay's behaviour and its defences.

    Memory bound per connection: about ``queue * max_frame`` bytes of queued
    frames plus the websocket write buffer (32 KiB) plus one frame in flight.

    Attributes:
        host: address to bind (default loopback only).
        port: TCP port; 0 picks a free one (see ``RelayServer.port``).
        max_clients: open connections allowed; extra ones are closed with
            code 1013 (try again later) right after the handshake.
        max_frame: largest incoming websocket message in bytes; a bigger one
            makes the websocket library close the connection with 1009.
        rate: frames per second each connection may send (token bucket refill).
        burst: token bucket capacity (frames a connection may send at once).
        queue: frames waiting to be written to one connection; when a
            subscriber's queue is full it is disconnected with code 1008.
        abuse_strikes: over-the-rate frames tolerated (refilled at one per
            second) before the connection is closed with code 1008.
        max_topics: topics one connection may be subscribed to.
        log_format: ``"json"`` (JSON lines) or ``"text"``, both on stderr.
        stats_interval: seconds between periodic counter logs (0 disables).
        close_timeout: seconds to wait for a closing handshake before
            aborting the TCP connection.
        ping_interval: seconds between websocket keepalive pings (None disables).
        ping_timeout: seconds to wait for a keepalive pong before closing.
        cluster: NATS server URLs (``nats://HOST:PORT``) of the relay cluster
            this relay joins (``net/relay_cluster.py``); empty: a lone relay,
            and nothing of NATS is imported.
        cluster_timeout: seconds a starting relay tries to reach a NATS
            server of ``cluster`` before giving up (exit status 1).
    """

    host: str = "127.0.0.1"
    port: int = 8765
    max_clients: int = 1024
    max_frame: int = DEFAULT_MAX_FRAME
    rate: float = 200.0
    burst: int = 400
    queue: int = 256
    abuse_strikes: int = 100
    max_topics: int = 64
    log_format: LogFormat = "json"
    stats_interval: float = 60.0
    close_timeout: float = 5.0
    ping_interval: float | None = 20.0
    ping_timeout: float | None = 20.0
    cluster: tuple[str, ...] = ()
    cluster_timeout: float = 10.0

    def __post_init__(self) -> None:
        for url in self.cluster:
            check_nats_url(url)
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port out of range: {self.port}")
        for name in ("max_clients", "max_frame", "burst", "queue", "abuse_strikes", "max_topics"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if not (math.isfinite(self.cluster_timeout) and self.cluster_timeout > 0):
            raise ValueError("cluster_timeout must be a positive number")
        for name in ("rate", "stats_interval", "close_timeout", "ping_interval", "ping_timeout"):
            value = getattr(self, name)
            if value is not None and not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value}")
        if self.rate <= 0:
            raise ValueError("rate must be positive")
        if self.stats_interval < 0:
            raise ValueError("stats_interval must be >= 0 (0 = only at shutdown)")
        if self.log_format not in ("json", "text"):
            raise ValueError(f"unknown log format {self.log_format!r}")
        if self.close_timeout <= 0:
            raise ValueError("close_timeout must be positive")

    def replace(self, **changes: Any) -> RelayConfig:
        """A copy with some fields changed (validated again)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update(changes)
        return RelayConfig(**values)


def check_nats_url(url: str, what: str = "--cluster") -> str:
    """Return ``url`` if it is a usable ``nats://HOST:PORT`` (or ``tls://``) URL.

    Raises:
        ValueError: naming ``what`` and saying what is wrong.
    """
    if not isinstance(url, str) or not url.startswith(("nats://", "tls://")):
        raise ValueError(f"{what} must be a nats://HOST:PORT URL, got {url!r}")
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


def add_relay_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``sdschat relay`` flags to ``parser`` (defaults from :class:`RelayConfig`)."""
    d = RelayConfig()
    parser.add_argument("--host", default=d.host, help=f"address to bind (default {d.host})")
    parser.add_argument(
        "--port", type=int, default=d.port, help=f"TCP port, 0 = any free port (default {d.port})"
    )
    parser.add_argument(
        "--max-clients",
        type=int,
        default=d.max_clients,
        metavar="N",
        help=f"maximum simultaneous connections (default {d.max_clients})",
    )
    parser.add_argument(
        "--max-frame",
        type=int,
        default=d.max_frame,
        metavar="BYTES",
        help=f"largest websocket message accepted (default {d.max_frame})",
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=d.rate,
        metavar="MSGS_PER_S",
        help=f"frames per second allowed per connection (default {d.rate:g})",
    )
    parser.add_argument(
        "--burst",
        type=int,
        default=d.burst,
        metavar="N",
        help=f"frames a connection may send in a burst (default {d.burst})",
    )
    parser.add_argument(
        "--queue",
        type=int,
        default=d.queue,
        metavar="FRAMES",
        help=f"send queue per connection; a full queue disconnects the slow client "
        f"(default {d.queue})",
    )
    parser.add_argument(
        "--max-topics",
        type=int,
        default=d.max_topics,
        metavar="N",
        help=f"topics one connection may subscribe to (default {d.max_topics})",
    )
    parser.add_argument(
        "--log-format",
        choices=("json", "text"),
        default=d.log_format,
        help="structured log format on stderr (default json)",
    )
    parser.add_argument(
        "--stats-interval",
        type=float,
        default=d.stats_interval,
        metavar="SECONDS",
        help=f"seconds between counter logs, 0 = only at shutdown (default {d.stats_interval:g})",
    )
    # --- relay cluster (net/relay_cluster.py)
    parser.add_argument(
        "--cluster",
        action="append",
        default=[],
        metavar="NATS_URL",
        help="join a relay cluster through this NATS server, nats://HOST:4222 (repeatable: "
        "the servers of one NATS cluster); needs nats-py (pip install 'sdschat[cluster]')",
    )
    parser.add_argument(
        "--cluster-timeout",
        type=float,
        default=d.cluster_timeout,
        metavar="SECONDS",
        help=f"give up starting when no --cluster server answers within this "
        f"(default {d.cluster_timeout:g})",
    )


def config_from_args(args: argparse.Namespace) -> RelayConfig:
    """Build a :class:`RelayConfig` from parsed :func:`add_relay_arguments` flags.

    Raises:
        ValueError: an invalid value (the message names it).
    """
    d = RelayConfig()
    return RelayConfig(
        host=args.host,
        port=args.port,
        max_clients=args.max_clients,
        max_frame=args.max_frame,
        rate=args.rate,
        burst=args.burst,
        queue=args.queue,
        max_topics=args.max_topics,
        log_format=args.log_format,
        stats_interval=args.stats_interval,
        cluster=tuple(getattr(args, "cluster", None) or ()),
        cluster_timeout=getattr(args, "cluster_timeout", d.cluster_timeout),
    )
