"""``sdschat store``: flags, and turning them into a :class:`net.store_config.StorePeerConfig`.

Topics to archive come from ``--topic HEX`` (any channel, the topic a node
prints when it joins: ``"topic"`` in its ``channel`` event) and ``--channel
NAME`` (a PUBLIC channel only: its key, and so its topic, follow from the
name; the store derives the topic and forgets the key). A private channel's
topic cannot be derived without its passphrase: give its topic hex instead.
The store never needs, and never holds, a passphrase.

Light at import (stdlib and ``net.store_config`` only) so ``sdschat --help`` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from net.store_config import (
    DEFAULT_STORE_PORT,
    StorePeerConfig,
    parse_duration_ms,
    parse_host_port,
    parse_size,
    parse_topic,
)

__all__ = ["add_cafile_argument", "add_store_arguments", "config_from_args", "run_store_command"]


def add_store_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``sdschat store``."""
    d = StorePeerConfig(data_dir=Path("."))
    p.add_argument(
        "--relay",
        action="append",
        default=[],
        metavar="URL",
        help="subscribe through this relay (repeatable), e.g. ws://127.0.0.1:8765",
    )
    p.add_argument(
        "--data-dir",
        default=None,
        help="the store's data directory (SQLite archive; one store per directory); required",
    )
    p.add_argument(
        "--write-key",
        action="append",
        default=[],
        metavar="TOPIC:KEY",
        help="archive this topic only from nodes that prove they hold its channel key "
        "(write proofs; refuses its envelopes from relays and the LAN); TOPIC:KEY as printed "
        "by --print-write-key (repeatable)",
    )
    p.add_argument(
        "--print-write-key",
        default=None,
        metavar="CHANNEL",
        help="print TOPIC:KEY for --write-key of this passphrase channel and exit (the "
        "passphrase from --passphrase-file, or asked), or of this members channel with "
        "--member-dir; the key lets a store check write proofs, never read or sign messages",
    )
    p.add_argument(
        "--member-dir",
        default=None,
        metavar="DIR",
        help="with --print-write-key: the data directory of a member of the members channel "
        "(the write key of its current epoch; print it again after a removal and give the "
        "store the new key, so that the removed member cannot write into it any more)",
    )
    p.add_argument(
        "--passphrase-file",
        default=None,
        metavar="FILE",
        help="with --print-write-key: read the channel passphrase from FILE (first line)",
    )
    p.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="HEX",
        help="archive this topic (hex; repeatable). Works for any channel, private ones too",
    )
    p.add_argument(
        "--channel",
        action="append",
        default=[],
        metavar="NAME",
        help="archive this PUBLIC channel (no passphrase; repeatable): the topic is derived "
        "from the name. For a private channel give --topic",
    )
    p.add_argument(
        "--listen",
        default=f"127.0.0.1:{DEFAULT_STORE_PORT}",
        metavar="HOST:PORT",
        help=f"answer queries here (default 127.0.0.1:{DEFAULT_STORE_PORT}; port 0 = any free "
        "port, logged as store_listening); 'none' disables queries",
    )
    p.add_argument(
        "--max-age",
        default="30d",
        metavar="DURATION",
        help="retention by age: delete envelopes older than this (30d, 12h, 90m, 45s; "
        "0 = keep forever; default 30d)",
    )
    p.add_argument(
        "--max-bytes",
        default="1G",
        metavar="SIZE",
        help="retention by size: keep at most this many envelope bytes, deleting the oldest "
        "of the writers holding the most first (1G, 500M, 64k; 0 = unlimited; default 1G)",
    )
    p.add_argument(
        "--retention-interval",
        type=float,
        default=d.retention_interval_s,
        metavar="SECONDS",
        help=f"seconds between retention runs (default {d.retention_interval_s:g})",
    )
    p.add_argument(
        "--max-hashes",
        type=int,
        default=d.max_hashes,
        metavar="N",
        help=f"most hashes in one by-hash query (default {d.max_hashes})",
    )
    p.add_argument(
        "--max-page-size",
        type=int,
        default=d.max_page_size,
        metavar="N",
        help=f"largest page of a by-time query (default {d.max_page_size})",
    )
    p.add_argument(
        "--max-clients",
        type=int,
        default=d.max_clients,
        metavar="N",
        help=f"simultaneous query connections (default {d.max_clients})",
    )
    p.add_argument(
        "--max-clients-per-ip",
        type=int,
        default=d.max_clients_per_ip,
        metavar="N",
        help=f"query connections from one host (an IPv4 /24, all of 127.0.0.0/8, an IPv6 "
        f"/64), 0 = no limit (default {d.max_clients_per_ip})",
    )
    from net.relay_config import add_host_prefix_arguments, add_tls_arguments  # stdlib only

    add_host_prefix_arguments(p, d.ipv4_host_prefix, d.ipv6_host_prefix)
    p.add_argument(
        "--idle-timeout",
        type=float,
        default=d.idle_timeout_s,
        metavar="SECONDS",
        help=f"close a query connection that sends no request this long, 0 = never "
        f"(default {d.idle_timeout_s:g})",
    )
    p.add_argument(
        "--lan",
        action="store_true",
        help="also receive envelopes by LAN gossip (zeroconf discovery) and announce this "
        "store's query port on the LAN, where nodes without --store find it",
    )
    p.add_argument(
        "--interface",
        action="append",
        default=[],
        metavar="IP",
        help="with --lan: IPv4 address for discovery and gossip (repeatable; default all "
        "interfaces)",
    )
    p.add_argument(
        "--lan-port",
        type=int,
        default=0,
        metavar="PORT",
        help="with --lan: gossip TCP port (default: any free port)",
    )
    p.add_argument(
        "--log-format",
        choices=("json", "text"),
        default="json",
        help="structured log format on stderr (default json)",
    )
    p.add_argument(
        "--stats-interval",
        type=float,
        default=d.stats_interval_s,
        metavar="SECONDS",
        help=f"seconds between store_stats log lines, 0 = only at exit "
        f"(default {d.stats_interval_s:g})",
    )
    add_tls_arguments(p)
    add_cafile_argument(p)
    add_jetstream_arguments(p, d)


def add_jetstream_arguments(p: argparse.ArgumentParser, d: StorePeerConfig) -> None:
    """``--jetstream`` and its settings: the archive in a JetStream cluster
    (``net/store_jetstream.py``), and moving a SQLite archive there."""
    from net.relay_config import add_nats_arguments  # stdlib only

    add_nats_arguments(
        p,
        "--jetstream",
        "keep the archive in JetStream through this NATS server, nats://HOST:4222 or "
        "tls://HOST:4222 (repeatable: the servers of one NATS cluster with JetStream, "
        "nats-server -js); every store peer given the same cluster and --jetstream-stream "
        "answers the same. Without it: SQLite in --data-dir",
        d.jetstream_timeout,
        "allow a --jetstream NATS URL with neither TLS nor credentials (refused by default "
        "unless on loopback: anyone reaching that port reads and deletes the archive)",
    )
    p.add_argument(
        "--replicas",
        type=int,
        default=0,
        metavar="N",
        help="with --jetstream: copies JetStream keeps of each envelope, 1 to 5 (default: "
        "3 when the cluster has 3 servers or more, else as many as it has; changing it "
        "changes the stream)",
    )
    p.add_argument(
        "--jetstream-stream",
        default=d.jetstream_stream,
        metavar="NAME",
        help=f"with --jetstream: the stream's name; store peers given the same share the "
        f"archive (default {d.jetstream_stream})",
    )
    p.add_argument(
        "--jetstream-lease",
        type=float,
        default=d.jetstream_lease_s,
        metavar="SECONDS",
        help=f"with --jetstream: how long the lease on running retention lasts unless "
        f"renewed; one store peer at a time holds it (default {d.jetstream_lease_s:g})",
    )
    p.add_argument(
        "--migrate-to-jetstream",
        action="store_true",
        help="copy the SQLite archive of --data-dir into the --jetstream archive (arrival "
        "times and writers kept; envelopes already there are skipped), then exit; run it "
        "with the store stopped",
    )


def add_cafile_argument(p: argparse.ArgumentParser) -> None:
    """``--cafile``: verify wss:// relays and stores against these CAs, not the system's."""
    p.add_argument(
        "--cafile",
        default=None,
        metavar="PEM",
        help="verify wss:// relays and stores against the CA certificates in this file "
        "instead of the system trust store",
    )


def _topics(args: argparse.Namespace, extra: tuple[bytes, ...] = ()) -> tuple[bytes, ...]:
    topics: list[bytes] = [parse_topic(t) for t in args.topic]
    topics += extra  # the topics of --write-key are archived too
    if args.channel:
        from net.channel_key import check_channel_name, derive_channel_key  # Argon2id: when needed

        for name in args.channel:
            check_channel_name(name)
            topics.append(derive_channel_key(name, None).topic)
    if not topics:
        raise ValueError(
            "nothing to archive: give --topic HEX, --channel NAME and/or --write-key TOPIC:KEY"
        )
    return tuple(dict.fromkeys(topics))


def _public_keys(args: argparse.Namespace) -> tuple[tuple[bytes, bytes], ...]:
    """``(topic, key)`` of each ``--channel`` (public: the key follows from the name)."""
    if not args.channel:
        return ()
    from net.channel_key import check_channel_name, derive_channel_key

    keys = []
    for name in args.channel:
        check_channel_name(name)
        key = derive_channel_key(name, None)
        keys.append((key.topic, key.key))
    return tuple(dict.fromkeys(keys))


def print_write_key(args: argparse.Namespace) -> int:
    """``sdschat store --print-write-key CHANNEL``: ``TOPIC:KEY`` on stdout, exit 0."""
    import getpass

    from net.channel_key import check_channel_name, derive_channel_key
    from net.store_proof import write_key

    name = args.print_write_key
    if args.member_dir is not None:
        return _print_members_write_key(name, Path(args.member_dir).expanduser())
    try:
        check_channel_name(name)
        if args.passphrase_file is not None:
            with open(args.passphrase_file, encoding="utf-8") as f:
                passphrase = f.readline().rstrip("\r\n")
        elif sys.stdin.isatty():
            passphrase = getpass.getpass(f"passphrase of {name}: ")
        else:
            passphrase = sys.stdin.readline().rstrip("\r\n")
    except (OSError, ValueError) as exc:
        print(f"sdschat store: {exc}", file=sys.stderr)
        return 2
    if not passphrase:
        print(f"sdschat store: {name} has no passphrase: a public channel's key is derivable "
              f"by anyone, so it has no write key", file=sys.stderr)
        return 2
    key = derive_channel_key(name, passphrase)
    print(f"{key.topic.hex()}:{write_key(key.key, key.topic).hex()}")
    return 0


def _print_members_write_key(name: str, member_dir: Path) -> int:
    """``--print-write-key NAME --member-dir DIR``: the write key of the members channel's
    current epoch, read from a member's data directory (``net/store_proof.py``)."""
    from app.members.secrets_file import MembersFileError, load
    from net.store_proof import write_key

    try:
        mc = load(member_dir, name)
    except (MembersFileError, OSError, ValueError) as exc:
        print(f"sdschat store: {exc}", file=sys.stderr)
        return 2
    if mc is None:
        print(f"sdschat store: #{name} is not a members channel in {member_dir}",
              file=sys.stderr)  # fmt: skip
        return 2
    key = mc.sending_key()
    print(f"{key.topic.hex()}:{write_key(key.key, key.topic).hex()}")
    return 0


def config_from_args(args: argparse.Namespace) -> StorePeerConfig:
    """Build the store's configuration from parsed :func:`add_store_arguments` flags.

    Raises:
        ValueError: a bad value (the message names it).
    """
    listen = None if args.listen.strip().lower() == "none" else parse_host_port(args.listen)
    if args.interface and not args.lan:
        raise ValueError("--interface needs --lan")
    if args.data_dir is None:
        raise ValueError("--data-dir is required")
    from net.store_proof import parse_write_key

    write_keys = tuple(parse_write_key(w) for w in args.write_key)
    public_keys = _public_keys(args)
    public = {topic for topic, _key in public_keys}
    for topic, _key in write_keys:
        if topic in public:
            raise ValueError(
                f"--write-key for the public channel of topic {topic.hex()}: anyone can derive "
                f"its key from the name, so a write proof would prove nothing"
            )
    return StorePeerConfig(
        data_dir=Path(args.data_dir).expanduser(),
        topics=_topics(args, tuple(t for t, _k in write_keys)),
        relays=tuple(args.relay),
        listen=listen,
        max_age_ms=parse_duration_ms(args.max_age),
        max_bytes=parse_size(args.max_bytes),
        retention_interval_s=args.retention_interval,
        max_hashes=args.max_hashes,
        max_page_size=args.max_page_size,
        default_page_size=min(200, args.max_page_size),
        max_clients=args.max_clients,
        max_clients_per_ip=args.max_clients_per_ip,
        ipv4_host_prefix=args.ipv4_host_prefix,
        ipv6_host_prefix=args.ipv6_host_prefix,
        idle_timeout_s=args.idle_timeout,
        log_format=args.log_format,
        stats_interval_s=args.stats_interval,
        certfile=args.certfile,
        keyfile=args.keyfile,
        write_keys=write_keys,
        public_channel_keys=public_keys,
        jetstream=tuple(args.jetstream),
        jetstream_timeout=args.jetstream_timeout,
        jetstream_cafile=args.jetstream_cafile,
        jetstream_certfile=args.jetstream_certfile,
        jetstream_keyfile=args.jetstream_keyfile,
        jetstream_token_file=args.jetstream_token_file,
        jetstream_insecure=args.jetstream_insecure,
        jetstream_replicas=args.replicas,
        jetstream_stream=args.jetstream_stream,
        jetstream_lease_s=args.jetstream_lease,
    )


def run_store_command(args: argparse.Namespace) -> int:
    """``sdschat store``: exit 0 after SIGINT/SIGTERM, 1 cannot listen or reach JetStream,
    2 usage, 3 data dir in use, 4 database unusable."""
    from net.tls import set_default_cafile

    if args.print_write_key is not None:
        return print_write_key(args)
    if args.member_dir is not None:
        print("sdschat store: --member-dir goes with --print-write-key", file=sys.stderr)
        return 2
    try:
        config = config_from_args(args)
        set_default_cafile(args.cafile)
    except ValueError as exc:
        print(f"sdschat store: {exc}", file=sys.stderr)
        return 2
    if args.migrate_to_jetstream:
        if not config.jetstream:
            print("sdschat store: --migrate-to-jetstream needs --jetstream", file=sys.stderr)
            return 2
        from net.store_migrate import run_migration

        return run_migration(config)
    from net.store_peer import run_store

    if not args.lan:
        return run_store(config)
    from net.lan.store_feed import LanStoreFeed
    from net.lan.transport import LanOptions

    options = LanOptions(interfaces=tuple(args.interface) or None, port=args.lan_port)
    return run_store(config, feed_factories=[lambda peer: LanStoreFeed.create(peer, options)])
