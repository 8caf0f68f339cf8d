"""Settings of ``sdschat store`` (the store peer) and their parsing helpers.

Light on purpose (stdlib only) so that ``sdschat --help`` stays fast; the
store itself lives in ``net/store_peer.py``.

Retention (both limits apply; 0 disables one):

* ``max_age_ms``: envelopes that arrived longer ago are deleted
  (``--max-age``, default 30 days);
* ``max_bytes``: when the archived envelopes total more, what the store cannot
  attribute goes first, then the writers holding the most lose their oldest
  envelopes until all fit, each keeping at least an equal share (``--max-bytes``,
  default 1 GiB; the store's rule, :mod:`storage.retention`).
  Sizes are envelope bytes, not the SQLite file's size; after deleting, the file
  gives its free pages back (incremental vacuum, ``net/store_peer.py``).

Retention runs at start, every ``retention_interval_s`` seconds, and at once
when an eighth of ``max_bytes`` was written since it last ran.

Where the envelopes live: the SQLite file of ``data_dir`` (the default), or with
``jetstream`` (``--jetstream NATS_URL``, repeatable) a replicated JetStream stream
that every store peer given the same NATS cluster and ``jetstream_stream`` shares
(``net/store_jetstream.py``; retention then runs on one of them at a time).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from net.hosts import HostGrouping
from net.relay_config import check_nats_options
from net.relay_log import LogFormat
from net.sizes import parse_size
from net.urls import check_ws_url

if TYPE_CHECKING:  # storage imports SQLite: only when a store runs
    from storage.retention import RetentionRule

__all__ = [
    "DEFAULT_STORE_PORT",
    "StorePeerConfig",
    "parse_duration_ms",
    "parse_host_port",
    "parse_size",
    "parse_topic",
]

DEFAULT_STORE_PORT = 8766
"""Default TCP port of a store's query listener."""

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")
_DURATION_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000,
                "w": 7 * 86_400_000}
_STREAM_NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}$")


def parse_duration_ms(text: str) -> int:
    """``"30d"``, ``"12h"``, ``"90m"``, ``"45s"``, ``"500ms"``, ``"2w"`` or plain seconds -> ms.

    Raises:
        ValueError: anything else.
    """
    m = _DURATION.match(text)
    if m is None:
        raise ValueError(f"not a duration: {text!r} (examples: 30d, 12h, 90m, 45s, 0)")
    unit = m.group(2) or "s"
    return int(float(m.group(1)) * _DURATION_MS[unit])


def parse_host_port(text: str, default_port: int = DEFAULT_STORE_PORT) -> tuple[str, int]:
    """``"127.0.0.1:8766"``, ``"[::1]:8766"``, ``"127.0.0.1"`` or ``":8766"`` -> (host, port).

    Raises:
        ValueError: a malformed address or a port out of range.
    """
    text = text.strip()
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ValueError(f"not HOST:PORT: {text!r}")
        port_text = rest[1:]
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    elif ":" in text:  # bare IPv6 address without a port
        host, port_text = text, ""
    else:
        host, port_text = text, ""
    host = host or "127.0.0.1"
    try:
        port = int(port_text) if port_text else default_port
    except ValueError:
        raise ValueError(f"not HOST:PORT: {text!r}") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"port out of range: {port}")
    return host, port


def parse_topic(text: str) -> bytes:
    """A topic given as hex (sdschat topics are 16 bytes = 32 hex digits).

    Raises:
        ValueError: not hex, or not 1 to 64 bytes.
    """
    try:
        topic = bytes.fromhex(text.strip())
    except ValueError:
        raise ValueError(f"a topic is hex digits, got {text!r}") from None
    if not 1 <= len(topic) <= 64:
        raise ValueError(f"a topic is 1 to 64 bytes, got {len(topic)}")
    return topic


@dataclass(frozen=True)
class StorePeerConfig:
    """Everything that shapes a store peer.

    Attributes:
        data_dir: the store's data directory (SQLite archive, lock).
        topics: the topics archived (16-byte sdschat topics).
        relays: relay URLs to subscribe through (any number, may be empty).
        listen: ``(host, port)`` of the query listener (port 0 picks a free
            one); ``None`` disables queries.
        max_age_ms: retention by age (0 keeps forever).
        max_bytes: retention by total envelope bytes (0 is unlimited).
        retention_interval_s: seconds between retention runs.
        max_hashes: most hashes in one by-hash query.
        max_page_size: largest page of a by-time query.
        default_page_size: page size when a query asks for 0.
        max_request_bytes: largest request frame answered; bigger ones (up to
            ``max_frame``) get ``Error{oversized}``.
        max_frame: largest websocket message read at all; bigger ones close
            the connection with 1009.
        response_frame_bytes: target size of one answer frame (answers are
            split into frames of about this size).
        max_page_bytes: a by-time page stops early once it holds this many
            envelope bytes (its ``next`` cursor continues the range).
        max_clients: open query connections allowed (extra: closed with 1013).
        max_clients_per_ip: open query connections allowed from one host (an
            IPv4 /24, all of ``127.0.0.0/8``, an IPv6 /64, as on the relay:
            :mod:`net.hosts`); extra ones are closed with 1013. 0: no limit.
        ipv4_host_prefix, ipv6_host_prefix: what counts as one host, for
            ``max_clients_per_ip`` and for the writer of a ``Put`` (24 and 64).
        idle_timeout_s: a query connection that sends no request for this many
            seconds is closed with 1008 (``idle``); clients reconnect when they
            next ask. 0: never.
        rate, burst: requests per second (token bucket) per query connection;
            excess requests get ``Error{rate_limited}``.
        flush_interval_s, flush_max: received envelopes are written in one
            transaction every ``flush_interval_s`` or every ``flush_max``
            envelopes, whichever comes first.
        ingest_limit: received envelopes waiting to be written; beyond it the
            receiving side waits (backpressure).
        log_format: ``"json"`` or ``"text"`` lines on stderr.
        stats_interval_s: seconds between ``store_stats`` log lines (0: only at exit).
        certfile: PEM certificate chain: the query listener serves ``wss://``;
            read again on SIGHUP (see :mod:`net.tls`).
        keyfile: PEM private key of ``certfile`` (None: it is in ``certfile``).
        write_keys: ``(topic, write key)`` pairs (``--write-key``): those topics
            are archived only from ``Put`` frames with a valid write proof
            (``net/store_proof.py``); their envelopes from relays and the LAN
            are refused (``unproven``). A topic may have several (a members
            channel's epochs while the operator switches): any of them proves.
        public_channel_keys: ``(topic, channel key)`` of the public channels
            archived by name (``--channel``; their key follows from the name, so
            anyone can have it): the store opens their envelopes only to read
            who signed them, for eviction fair per signer (``net/store_peer.py``),
            and keeps them as they came.
        jetstream: NATS server URLs (``nats://`` or ``tls://``, credentials as for
            ``sdschat relay --cluster``) of the JetStream cluster that keeps the
            archive instead of ``data_dir``'s SQLite file (``net/store_jetstream.py``).
        jetstream_timeout: seconds a starting store tries to reach a NATS server.
        jetstream_cafile, jetstream_certfile, jetstream_keyfile, jetstream_token_file,
            jetstream_insecure: TLS and credentials to NATS, as ``--cluster-*`` of the
            relay (:func:`net.relay_config.check_nats_options`).
        jetstream_replicas: copies of each envelope JetStream keeps (1 to 5); 0: 3
            when the cluster has 3 servers or more, else as many as it has.
        jetstream_stream: the stream's name (its KV buckets are named after it);
            store peers given the same one share the archive.
        jetstream_lease_s: seconds a store peer's lease on running retention lasts
            unless renewed (renewed every third of it).
    """

    data_dir: Path
    topics: tuple[bytes, ...] = ()
    relays: tuple[str, ...] = ()
    listen: tuple[str, int] | None = ("127.0.0.1", DEFAULT_STORE_PORT)
    max_age_ms: int = 30 * 86_400_000
    max_bytes: int = 1024**3
    retention_interval_s: float = 60.0
    max_hashes: int = 256
    max_page_size: int = 1000
    default_page_size: int = 200
    max_request_bytes: int = 64 * 1024
    max_frame: int = 1024 * 1024
    response_frame_bytes: int = 1024 * 1024
    max_page_bytes: int = 32 * 1024 * 1024
    max_clients: int = 256
    max_clients_per_ip: int = 16
    ipv4_host_prefix: int = 24
    ipv6_host_prefix: int = 64
    idle_timeout_s: float = 60.0
    rate: float = 200.0
    burst: int = 400
    flush_interval_s: float = 0.05
    flush_max: int = 512
    ingest_limit: int = 8192
    log_format: LogFormat = "json"
    stats_interval_s: float = 60.0
    certfile: str | None = None
    keyfile: str | None = None
    write_keys: tuple[tuple[bytes, bytes], ...] = ()
    public_channel_keys: tuple[tuple[bytes, bytes], ...] = ()
    jetstream: tuple[str, ...] = ()
    jetstream_timeout: float = 10.0
    jetstream_cafile: str | None = None
    jetstream_certfile: str | None = None
    jetstream_keyfile: str | None = None
    jetstream_token_file: str | None = None
    jetstream_insecure: bool = False
    jetstream_replicas: int = 0
    jetstream_stream: str = "SDSCHAT_STORE"
    jetstream_lease_s: float = 15.0

    def __post_init__(self) -> None:
        for name in ("max_hashes", "max_page_size", "default_page_size", "max_request_bytes",
                     "max_frame", "response_frame_bytes", "max_page_bytes", "max_clients",
                     "burst", "flush_max", "ingest_limit"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.default_page_size > self.max_page_size:
            raise ValueError("default_page_size must be <= max_page_size")
        if self.max_request_bytes > self.max_frame:
            raise ValueError("max_request_bytes must be <= max_frame")
        if self.max_age_ms < 0 or self.max_bytes < 0:
            raise ValueError("retention limits must be >= 0 (0 disables)")
        for name in ("retention_interval_s", "flush_interval_s", "rate", "stats_interval_s"):
            value = getattr(self, name)
            if not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value}")
        if self.max_clients_per_ip < 0:
            raise ValueError("max_clients_per_ip must be >= 0 (0 = no limit)")
        HostGrouping(self.ipv4_host_prefix, self.ipv6_host_prefix)
        if not math.isfinite(self.idle_timeout_s) or self.idle_timeout_s < 0:
            raise ValueError(
                f"idle_timeout_s must be a number of seconds >= 0, got {self.idle_timeout_s}"
            )
        if self.stats_interval_s < 0:
            raise ValueError("stats_interval_s must be >= 0 (0 disables)")
        if self.retention_interval_s <= 0 or self.flush_interval_s <= 0 or self.rate <= 0:
            raise ValueError("intervals and rates must be positive")
        if self.log_format not in ("json", "text"):
            raise ValueError(f"unknown log format {self.log_format!r}")
        for topic in self.topics:
            if not 1 <= len(topic) <= 64:
                raise ValueError("a topic is 1 to 64 bytes")
        for url in self.relays:
            check_ws_url(url, "relay URL")
        if self.keyfile is not None and self.certfile is None:
            raise ValueError("--keyfile needs --certfile")
        for topic, key in self.write_keys:
            if topic not in self.topics:
                raise ValueError(
                    f"--write-key for topic {topic.hex()}, which this store does not archive "
                    f"(add --topic {topic.hex()})"
                )
            if len(key) != 32:
                raise ValueError("a write key is 32 bytes")
        for topic, key in self.public_channel_keys:
            if topic not in self.topics or len(key) != 32:
                raise ValueError("a public channel key is 32 bytes, for a topic archived")
        if self.write_keys and self.listen is None:
            raise ValueError("--write-key needs a query listener (nodes send proofs there)")
        if self.certfile is not None and self.listen is None:
            raise ValueError("--certfile needs a query listener (not --listen none)")
        check_nats_options(
            "--jetstream", self.jetstream, cafile=self.jetstream_cafile,
            certfile=self.jetstream_certfile, keyfile=self.jetstream_keyfile,
            token_file=self.jetstream_token_file, insecure=self.jetstream_insecure,
            timeout=self.jetstream_timeout,
        )
        if not 0 <= self.jetstream_replicas <= 5:
            raise ValueError(f"--replicas must be 1 to 5 (JetStream's limit), got "
                             f"{self.jetstream_replicas}")
        if self.jetstream_replicas and not self.jetstream:
            raise ValueError("--replicas needs --jetstream")
        if not _STREAM_NAME.match(self.jetstream_stream):
            raise ValueError(f"--jetstream-stream must be 1 to 32 letters, digits, _ or -, "
                             f"got {self.jetstream_stream!r}")
        if not (math.isfinite(self.jetstream_lease_s) and self.jetstream_lease_s >= 1):
            raise ValueError("--jetstream-lease must be at least 1 second")

    @cached_property
    def retention(self) -> RetentionRule:
        """The retention rule of ``max_bytes`` and ``max_age_ms`` (:mod:`storage.retention`)."""
        from storage.retention import RetentionRule

        return RetentionRule(max_bytes=self.max_bytes, max_age_ms=self.max_age_ms)

    @cached_property
    def host_grouping(self) -> HostGrouping:
        """What counts as one host (``ipv4_host_prefix``, ``ipv6_host_prefix``)."""
        return HostGrouping(self.ipv4_host_prefix, self.ipv6_host_prefix)

    def replace(self, **changes: Any) -> StorePeerConfig:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    def as_log_fields(self) -> dict[str, Any]:
        """The settings worth a log line (no paths beyond the data dir)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "topics":
                value = [t.hex() for t in value]
            elif f.name in ("write_keys", "public_channel_keys"):
                value = [t.hex() for t, _key in value]  # which topics, never the keys
            elif f.name == "jetstream":
                from net.urls import redact_url

                value = [redact_url(u) for u in value]
            elif isinstance(value, Path):
                value = str(value)
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out
