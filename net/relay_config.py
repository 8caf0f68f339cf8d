"""Settings of ``sdschat relay`` and the command-line flags that set them.

This module is deliberately light (no websockets, no protobuf import) so that
``sdschat --help`` stays fast; the server itself lives in ``net/relay.py``.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any
from urllib.parse import urlsplit

from net.forwarded import parse_networks
from net.hosts import HostGrouping, is_loopback_host
from net.relay_log import LogFormat
from net.sizes import parse_size
from net.urls import check_nats_url, redact_url

__all__ = [
    "DEFAULT_MAX_FRAME",
    "MAX_TOPIC_BYTES",
    "RelayConfig",
    "add_host_prefix_arguments",
    "add_nats_arguments",
    "add_relay_arguments",
    "add_tls_arguments",
    "check_nats_options",
    "config_from_args",
    "insecure_nats_urls",
]

DEFAULT_MAX_FRAME = 256 * 1024 + 1024
"""Largest websocket message accepted: one maximal envelope
(``net.envelope.MAX_ENVELOPE_BYTES`` = 256 KiB) plus 1 KiB of frame overhead."""

MAX_TOPIC_BYTES = 64
"""Longest topic a client may subscribe or publish to (sdschat topics are 16 bytes)."""


@dataclass(frozen=True)
class RelayConfig:
    """Everything that shapes a relay's behaviour and its defences.

    Memory bound per connection: at most ``queue_bytes`` of queued frames (and
    ``queue`` frames) plus the websocket write buffer (32 KiB) plus one frame;
    all connections together queue at most ``memory_budget`` bytes.

    Attributes:
        host: address to bind (default loopback only); several separated by
            commas (``127.0.0.1,::1``) are all bound, on the same ``port``
            (which must then not be 0). See :attr:`hosts`.
        port: TCP port; 0 picks a free one (see ``RelayServer.port``).
        max_clients: open connections allowed; extra ones are closed with
            code 1013 (try again later) right after the handshake.
        max_frame: largest incoming websocket message in bytes; a bigger one
            makes the websocket library close the connection with 1009.
        rate: frames per second each connection may send (token bucket refill).
        burst: token bucket capacity (frames a connection may send at once).
        queue: frames waiting to be written to one connection; when a
            subscriber's queue is full it is disconnected with code 1008.
        queue_bytes: bytes waiting to be written to one connection (frames
            counted at their encoded size); a subscriber whose queue would
            exceed it is disconnected with code 1008 (``slow_consumer``).
        max_lag: seconds the oldest frame queued for a connection may wait;
            a reader further behind is disconnected with 1008 (``lagging``).
        memory_budget: bytes queued for all connections together; past it the
            connections holding the most are disconnected with 1008
            (``memory_budget``) until the new frame fits.
        max_clients_per_ip: open connections allowed from one host (0: no
            limit, e.g. behind a reverse proxy where every client has the
            proxy's address); extra ones are closed with 1013.
        ipv4_host_prefix: what ``max_clients_per_ip`` (and a full relay's
            room for a new host) counts as one IPv4 host: its /24 by default;
            all of ``127.0.0.0/8`` is always one (:mod:`net.hosts`).
        ipv6_host_prefix: the same for IPv6: its /64 by default.
        idle_timeout: seconds a connection may stay open without subscribing
            to any topic; then it is closed with 1008 (``idle``). 0 disables.
        abuse_strikes: over-the-rate frames tolerated (refilled at one per
            second) before the connection is closed with code 1008.
        max_topics: topics one connection may be subscribed to.
        log_format: ``"json"`` (JSON lines) or ``"text"``, both on stderr.
        stats_interval: seconds between periodic counter logs (0 disables).
        close_timeout: seconds to wait for a closing handshake before
            aborting the TCP connection.
        ping_interval: seconds between websocket keepalive pings (None disables).
        ping_timeout: seconds to wait for a keepalive pong before closing.
        certfile: PEM certificate chain: serve ``wss://`` (TLS) instead of
            ``ws://``; read again on SIGHUP (see :mod:`net.tls`).
        keyfile: PEM private key of ``certfile`` (None: it is in ``certfile``).
        cluster: NATS server URLs (``nats://HOST:PORT``) of the relay cluster
            this relay joins (``net/relay_cluster.py``); empty: a lone relay,
            and nothing of NATS is imported.
        cluster_timeout: seconds a starting relay tries to reach a NATS
            server of ``cluster`` before giving up (exit status 1).
        cluster_cafile: PEM CA certificates to verify the NATS servers with
            (instead of the system store); implies TLS to NATS.
        cluster_certfile: PEM client certificate for NATS servers that verify
            clients (``verify: true``); implies TLS to NATS.
        cluster_keyfile: its private key (None: it is in ``cluster_certfile``).
        cluster_token_file: a file holding the NATS authentication token (kept
            out of the command line, where ``ps`` shows it).
        cluster_insecure: allow a ``cluster`` URL that is neither TLS nor
            authenticated on a host other than loopback (``--cluster-insecure``);
            without it such a URL is refused (:func:`insecure_nats_urls`).
        cluster_publisher_bytes: bytes per second one publisher (a client of
            another relay, or anything publishing on NATS without the relays'
            header) may send this relay through NATS, twice that at once; and
            like a client connection, at most ``rate`` frames/s (``burst`` at
            once). Beyond it envelopes are dropped (``shed_publisher``), not
            the local clients (``net/relay_cluster.py``).
        trusted_proxies: addresses/networks (CIDR) of reverse proxies in front
            of the relay: for a connection from one of them, the client's
            address (for ``max_clients_per_ip`` and the logs) is read from
            ``X-Forwarded-For`` (:mod:`net.forwarded`); never for others.
    """

    host: str = "127.0.0.1"
    port: int = 8765
    max_clients: int = 1024
    max_frame: int = DEFAULT_MAX_FRAME
    rate: float = 200.0
    burst: int = 400
    queue: int = 256
    queue_bytes: int = 4 * 1024 * 1024
    max_lag: float = 20.0
    memory_budget: int = 256 * 1024 * 1024
    max_clients_per_ip: int = 64
    ipv4_host_prefix: int = 24
    ipv6_host_prefix: int = 64
    idle_timeout: float = 30.0
    abuse_strikes: int = 100
    max_topics: int = 64
    log_format: LogFormat = "json"
    stats_interval: float = 60.0
    close_timeout: float = 5.0
    ping_interval: float | None = 20.0
    ping_timeout: float | None = 20.0
    certfile: str | None = None
    keyfile: str | None = None
    cluster: tuple[str, ...] = ()
    cluster_timeout: float = 10.0
    trusted_proxies: tuple[str, ...] = ()
    cluster_cafile: str | None = None
    cluster_certfile: str | None = None
    cluster_keyfile: str | None = None
    cluster_token_file: str | None = None
    cluster_publisher_bytes: int = 8 * 1024 * 1024
    cluster_insecure: bool = False

    def __post_init__(self) -> None:
        if not all(self.hosts):
            raise ValueError(f"--host must be an address or addresses separated by commas, "
                             f"got {self.host!r}")
        if len(self.hosts) > 1 and self.port == 0:
            raise ValueError("--port 0 picks a port per address: give a port to bind "
                             "several --host addresses")
        parse_networks(self.trusted_proxies)
        HostGrouping(self.ipv4_host_prefix, self.ipv6_host_prefix)
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port out of range: {self.port}")
        for name in ("max_clients", "max_frame", "burst", "queue", "abuse_strikes", "max_topics"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
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
        if self.keyfile is not None and self.certfile is None:
            raise ValueError("--keyfile needs --certfile")
        check_nats_options(
            "--cluster", self.cluster, cafile=self.cluster_cafile, certfile=self.cluster_certfile,
            keyfile=self.cluster_keyfile, token_file=self.cluster_token_file,
            insecure=self.cluster_insecure, timeout=self.cluster_timeout,
        )
        for name in ("max_lag", "idle_timeout"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0 or (name == "max_lag" and value == 0):
                raise ValueError(f"{name} must be a positive number of seconds, got {value}")
        if self.queue_bytes < self.max_frame:
            raise ValueError(
                f"--queue-bytes ({self.queue_bytes}) must be at least --max-frame "
                f"({self.max_frame}): a queue must hold one largest frame"
            )
        if self.memory_budget < self.queue_bytes:
            raise ValueError(
                f"--memory-budget ({self.memory_budget}) must be at least --queue-bytes "
                f"({self.queue_bytes})"
            )
        if self.cluster_publisher_bytes < self.max_frame:
            raise ValueError(
                f"--cluster-publisher-bytes ({self.cluster_publisher_bytes}) must be at least "
                f"--max-frame ({self.max_frame}): a publisher must be able to send one frame"
            )
        if self.max_clients_per_ip < 0:
            raise ValueError("max_clients_per_ip must be >= 0 (0 = no limit)")

    @property
    def hosts(self) -> tuple[str, ...]:
        """The addresses bound (``host`` split at commas; ``[::1]`` as ``::1``)."""
        return tuple(h.strip().removeprefix("[").removesuffix("]") for h in self.host.split(","))

    @cached_property
    def host_grouping(self) -> HostGrouping:
        """What counts as one host (``ipv4_host_prefix``, ``ipv6_host_prefix``)."""
        return HostGrouping(self.ipv4_host_prefix, self.ipv6_host_prefix)

    def replace(self, **changes: Any) -> RelayConfig:
        """A copy with some fields changed (validated again)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update(changes)
        return RelayConfig(**values)


def insecure_nats_urls(urls: tuple[str, ...], *, tls: bool, token_file: bool) -> list[str]:
    """The NATS URLs of ``urls`` that would carry the cluster in the open: neither TLS
    (``tls://``, or ``tls`` for a CA or client certificate given) nor credentials
    (``USER:PASSWORD@`` or ``TOKEN@`` in the URL, ``token_file``), on a host that is
    not loopback for certain (:func:`net.hosts.is_loopback_host`: an IP literal in
    ``127.0.0.0/8``, ``::1``, or exactly ``localhost``; a DNS name such as
    ``127.0.0.1.nip.io`` may resolve anywhere)."""
    if tls or token_file:
        return []
    out = []
    for url in urls:
        parts = urlsplit(url)
        if parts.scheme == "tls" or parts.username:
            continue
        if is_loopback_host(parts.hostname or ""):
            continue
        out.append(url)
    return out


def check_nats_options(
    flag: str,
    urls: tuple[str, ...],
    *,
    cafile: str | None,
    certfile: str | None,
    keyfile: str | None,
    token_file: str | None,
    insecure: bool,
    timeout: float,
) -> None:
    """The NATS settings of ``flag`` (``--cluster`` of the relay, ``--jetstream`` of the
    store) as one rule for both: usable URLs, TLS files only with URLs, and no URL that
    carries the envelopes in the open (:func:`insecure_nats_urls`) unless ``insecure``.

    Raises:
        ValueError: naming the flag to fix.
    """
    for url in urls:
        check_nats_url(url, flag)
    if not (math.isfinite(timeout) and timeout > 0):
        raise ValueError(f"{flag}-timeout must be a positive number of seconds")
    if keyfile is not None and certfile is None:
        raise ValueError(f"{flag}-keyfile needs {flag}-certfile")
    for suffix, value in (("cafile", cafile), ("certfile", certfile), ("token-file", token_file)):
        if value is not None and not urls:
            raise ValueError(f"{flag}-{suffix} needs {flag}")
    if insecure and not urls:
        raise ValueError(f"{flag}-insecure needs {flag}")
    if urls and not insecure:
        open_urls = insecure_nats_urls(
            urls, tls=cafile is not None or certfile is not None, token_file=token_file is not None
        )
        if open_urls:
            raise ValueError(
                f"{flag} {', '.join(redact_url(u) for u in open_urls)} has neither "
                f"TLS nor credentials: anyone who reaches that NATS port could read every "
                f"topic's ciphertext and inject envelopes. Use tls:// or {flag}-cafile, "
                f"or credentials (nats://USER:PASSWORD@HOST:4222, {flag}-token-file), "
                f"or, on a network you trust, {flag}-insecure"
            )


def add_nats_arguments(
    parser: argparse.ArgumentParser, flag: str, url_help: str, timeout: float, insecure_help: str
) -> None:
    """``FLAG NATS_URL`` (repeatable) and its ``FLAG-timeout``, ``FLAG-cafile``,
    ``FLAG-certfile``, ``FLAG-keyfile``, ``FLAG-token-file`` and ``FLAG-insecure``: the
    same NATS connection settings for the relay (``--cluster``) and the store
    (``--jetstream``), checked by :func:`check_nats_options`."""
    parser.add_argument(flag, action="append", default=[], metavar="NATS_URL", help=url_help)
    parser.add_argument(
        f"{flag}-timeout",
        type=float,
        default=timeout,
        metavar="SECONDS",
        help=f"give up starting when no {flag} server answers within this (default {timeout:g})",
    )
    parser.add_argument(
        f"{flag}-cafile",
        default=None,
        metavar="PEM",
        help="TLS to NATS: verify its servers against these CA certificates instead of the "
        "system store (tls://HOST:4222 URLs, or a server that requires TLS, use TLS anyway)",
    )
    parser.add_argument(
        f"{flag}-certfile",
        default=None,
        metavar="PEM",
        help="TLS to NATS: client certificate, for NATS servers that verify clients",
    )
    parser.add_argument(
        f"{flag}-keyfile",
        default=None,
        metavar="PEM",
        help=f"private key of {flag}-certfile (omit if the certificate file holds it)",
    )
    parser.add_argument(
        f"{flag}-token-file",
        default=None,
        metavar="FILE",
        help="NATS authentication token, read from this file (user and password go in the "
        "URL: nats://USER:PASSWORD@HOST:4222)",
    )
    parser.add_argument(f"{flag}-insecure", action="store_true", help=insecure_help)


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_relay_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``sdschat relay`` flags to ``parser`` (defaults from :class:`RelayConfig`)."""
    d = RelayConfig()
    parser.add_argument(
        "--host",
        default=d.host,
        help=f"address to bind, or several separated by commas, e.g. 127.0.0.1,::1 "
        f"(default {d.host})",
    )
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
        "--queue-bytes",
        type=_size,
        default=d.queue_bytes,
        metavar="SIZE",
        help=f"bytes queued for one connection; beyond it the slow client is disconnected "
        f"(4M, 512k; default {d.queue_bytes // 2**20}M)",
    )
    parser.add_argument(
        "--max-lag",
        type=float,
        default=d.max_lag,
        metavar="SECONDS",
        help=f"a client whose oldest queued frame waited longer is disconnected "
        f"(default {d.max_lag:g})",
    )
    parser.add_argument(
        "--memory-budget",
        type=_size,
        default=d.memory_budget,
        metavar="SIZE",
        help=f"bytes queued for all connections together; past it the clients holding the "
        f"most are disconnected (default {d.memory_budget // 2**20}M)",
    )
    parser.add_argument(
        "--max-clients-per-ip",
        type=int,
        default=d.max_clients_per_ip,
        metavar="N",
        help=f"connections from one host (an IPv4 /24, all of 127.0.0.0/8, an IPv6 /64), "
        f"0 = no limit (default {d.max_clients_per_ip}); behind a reverse proxy see "
        f"--trusted-proxy",
    )
    add_host_prefix_arguments(parser, d.ipv4_host_prefix, d.ipv6_host_prefix)
    parser.add_argument(
        "--trusted-proxy",
        action="append",
        default=[],
        metavar="CIDR",
        help="a reverse proxy's address or network (repeatable): for connections from it, "
        "the client's address (per-address limit, logs) is the rightmost untrusted one of "
        "X-Forwarded-For; the header is ignored from anyone else",
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=d.idle_timeout,
        metavar="SECONDS",
        help=f"close connections that subscribe to nothing within this time, 0 = never "
        f"(default {d.idle_timeout:g})",
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
    add_nats_arguments(
        parser,
        "--cluster",
        "join a relay cluster through this NATS server, nats://HOST:4222 (repeatable: "
        "the servers of one NATS cluster); needs nats-py (pip install 'sdschat[cluster]')",
        d.cluster_timeout,
        "allow a --cluster NATS URL with neither TLS nor credentials (refused by "
        "default unless on loopback: anyone reaching that port reads and injects envelopes)",
    )
    parser.add_argument(
        "--cluster-publisher-bytes",
        type=_size,
        default=d.cluster_publisher_bytes,
        metavar="SIZE",
        help=f"bytes per second one publisher may send this relay through NATS (twice that "
        f"at once); beyond it its envelopes are dropped, not the clients "
        f"(default {d.cluster_publisher_bytes // 2**20}M)",
    )
    add_tls_arguments(parser)


def add_host_prefix_arguments(parser: argparse.ArgumentParser, ipv4: int, ipv6: int) -> None:
    """``--ipv4-host-prefix``/``--ipv6-host-prefix``: what per-host limits count as one
    host (shared by relay and store; :mod:`net.hosts`)."""
    parser.add_argument(
        "--ipv4-host-prefix",
        type=int,
        default=ipv4,
        metavar="BITS",
        help=f"IPv4 addresses sharing this many leading bits are one host for the per-host "
        f"limits (1-32, default {ipv4}; all of 127.0.0.0/8 is always one host)",
    )
    parser.add_argument(
        "--ipv6-host-prefix",
        type=int,
        default=ipv6,
        metavar="BITS",
        help=f"IPv6 addresses sharing this many leading bits are one host for the per-host "
        f"limits (1-128, default {ipv6})",
    )


def add_tls_arguments(parser: argparse.ArgumentParser) -> None:
    """``--certfile``/``--keyfile``: serve ``wss://`` (shared by relay and store)."""
    parser.add_argument(
        "--certfile",
        default=None,
        metavar="PEM",
        help="serve wss:// (TLS) with this certificate chain (server certificate first); "
        "SIGHUP reloads it and --keyfile for new connections, without a restart",
    )
    parser.add_argument(
        "--keyfile",
        default=None,
        metavar="PEM",
        help="private key of --certfile (omit if the certificate file holds it)",
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
        queue_bytes=args.queue_bytes,
        max_lag=args.max_lag,
        memory_budget=args.memory_budget,
        max_clients_per_ip=args.max_clients_per_ip,
        ipv4_host_prefix=getattr(args, "ipv4_host_prefix", d.ipv4_host_prefix),
        ipv6_host_prefix=getattr(args, "ipv6_host_prefix", d.ipv6_host_prefix),
        idle_timeout=args.idle_timeout,
        max_topics=args.max_topics,
        log_format=args.log_format,
        stats_interval=args.stats_interval,
        certfile=args.certfile,
        keyfile=args.keyfile,
        cluster=tuple(getattr(args, "cluster", None) or ()),
        cluster_timeout=getattr(args, "cluster_timeout", d.cluster_timeout),
        trusted_proxies=tuple(getattr(args, "trusted_proxy", None) or ()),
        cluster_cafile=getattr(args, "cluster_cafile", None),
        cluster_certfile=getattr(args, "cluster_certfile", None),
        cluster_keyfile=getattr(args, "cluster_keyfile", None),
        cluster_token_file=getattr(args, "cluster_token_file", None),
        cluster_insecure=bool(getattr(args, "cluster_insecure", False)),
        cluster_publisher_bytes=getattr(
            args, "cluster_publisher_bytes", d.cluster_publisher_bytes
        ),
    )
