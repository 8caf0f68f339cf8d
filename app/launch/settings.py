"""Settings of a node (``sdschat join``): protocol timings from a TOML file and flags.

Precedence: the protocol profile (``--profile`` or the file's ``profile``:
``default`` is ``sds.Config()``, sdschat's sizes; ``waku`` is
``sds.Config.waku()``, js-waku's, for channels shared with js-waku peers), then
``--fast`` (``sds.Config.fast(1000)``: second-scale timings for demos and
tests), then the config file, then the individual flags.

Config file (``--config FILE``, TOML; without ``--config`` the file
``$XDG_CONFIG_HOME/sdschat/config.toml`` (``~/.config/sdschat/config.toml``) is read
when it exists, unless ``--no-config``)::

    # Node settings (all optional)
    relay = "ws://127.0.0.1:8765"   # without a relay here or --relay: LAN gossip
    # or several relays of one cluster, tried in turn (failover):
    # relay = ["ws://10.0.0.1:8765", "ws://10.0.0.2:8765"]
    store = "ws://127.0.0.1:8766"   # a store peer to catch up from (as --store), or several
    # store peers of one archive, used in turn (failover):
    # store = ["ws://10.0.0.1:8766", "ws://10.0.0.2:8766"]
    name = "alice"
    profile = "default"      # or "waku": js-waku's sizes (sds.Config.waku())
    fast = true              # start from sds.Config.fast(fast_scale_ms)
    fast_scale_ms = 1000
    drop_rate = 0.0          # FOR DEMOS AND TESTS: drop this fraction of envelopes
    state_save_ms = 2000     # least interval between core-state saves
    recent_window = 2000     # newest messages per channel that keep their envelope
    file_quota_mib = 64      # received file segments kept per sender and channel
    file_channel_mib = 256   # ... per public or passphrase channel, all senders together

    [protocol]               # any sds.Config field, by name
    resend_unacknowledged_ms = 2000
    sync_interval_ms = 2000
    lost_timeout_ms = 20000

    [keys]                   # the TUI's keymap (app/tui/config.py; headless ignores it)
    search = "ctrl+f"
    [colours]                # the TUI's log colours (app/tui/config.py)
    mention = "#ffd866"

Unknown keys are errors (a typo must not silently keep a default).
"""

from __future__ import annotations

import argparse
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sds
from app.chat.file_quota import DEFAULT_CHANNEL_FILE_BYTES, DEFAULT_FILE_QUOTA_BYTES
from app.launch.last_setup import StartPlan, apply_last_setup
from app.node.runtime import DEFAULT_STATE_SAVE_MS
from net.channel_key import check_channel_name
from net.urls import check_ws_url
from storage.schema import DEFAULT_RECENT_WINDOW

__all__ = [
    "NodeSettings",
    "add_join_arguments",
    "default_config_path",
    "load_config_file",
    "settings_from_args",
]

_TOP_KEYS = {
    "relay", "store", "name", "profile", "fast", "fast_scale_ms", "drop_rate", "state_save_ms",
    "recent_window", "file_quota_mib", "file_channel_mib", "protocol",
    "keys", "colours", "colors",  # the TUI's keymap and colours (app/tui/config.py)
    "log",  # the TUI's logging to files (app/tui/chatlog.py)
}

#: what each top-level key must hold ("number": an integer or a float)
_TOP_TYPES: dict[str, str] = {
    "relay": "string or list of strings",
    "store": "string or list of strings",
    "name": "string",
    "profile": "string",
    "fast": "boolean",
    "fast_scale_ms": "integer",
    "drop_rate": "number",
    "state_save_ms": "integer",
    "recent_window": "integer",
    "file_quota_mib": "integer",
    "file_channel_mib": "integer",
    "protocol": "table",
    "keys": "table",
    "colours": "table",
    "colors": "table",
    "log": "table",
}


_KIND_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "boolean": bool,
    "integer": int,
    "number": (int, float),
    "table": dict,
}


def _kind_ok(value: object, kind: str) -> bool:
    if kind == "string or list of strings":
        items = value if isinstance(value, list) else [value]
        return bool(items) and all(isinstance(v, str) for v in items)
    # bool is an int in Python; TOML true/false is never an integer or number here
    if isinstance(value, bool) and kind != "boolean":
        return False
    return isinstance(value, _KIND_TYPES[kind])


def _a(kind: str) -> str:
    if kind.startswith("string or"):
        return f"a {kind}"
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _protocol_kind(default: object) -> str:
    """What a ``[protocol]`` key must hold, from the type of its default."""
    if isinstance(default, bool):
        return "boolean"
    if isinstance(default, float):
        return "number"
    return "integer"  # the int fields, and ack_threshold_override (None: off)

#: flag destination -> sds.Config field(s) it sets
_TIMING_FLAGS: dict[str, tuple[str, ...]] = {
    "resend_ms": ("resend_unacknowledged_ms",),
    "sync_ms": ("sync_interval_ms",),
    "lost_timeout_ms": ("lost_timeout_ms",),
    "repair_tmin_ms": ("repair_t_min_ms",),
    "repair_tmax_ms": ("repair_t_max_ms",),
    "sweep_ms": ("sweep_interval_ms",),
}


@dataclass(frozen=True)
class NodeSettings:
    """Everything ``sdschat join`` resolved from its config file and flags."""

    config: sds.Config
    relay: str
    name: str | None
    drop_rate: float
    drop_seed: int | None
    state_save_ms: int
    relays: tuple[str, ...] = ()
    """Every relay URL given, in order (``relay`` is the first); the client fails over."""
    recent_window: int = DEFAULT_RECENT_WINDOW
    new_history: bool = False
    file_quota_bytes: int = DEFAULT_FILE_QUOTA_BYTES
    """Received file segments kept per sender and channel (``file_quota_mib``)."""
    file_channel_bytes: int = DEFAULT_CHANNEL_FILE_BYTES
    """... per public or passphrase channel, all senders (``file_channel_mib``)."""
    start: StartPlan | None = None
    """What the last setup gave this start (:mod:`app.launch.last_setup`), kept by
    :func:`~app.launch.last_setup.record_start` once the start succeeded."""


def default_config_path() -> Path:
    """``$XDG_CONFIG_HOME/sdschat/config.toml``, else ``~/.config/sdschat/config.toml``."""
    base = os.environ.get("XDG_CONFIG_HOME")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".config"
    return root / "sdschat" / "config.toml"


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Parse and check a node config file (see the module docstring).

    Raises:
        ValueError: unreadable, not TOML, or unknown keys (the message says which).
    """
    p = Path(path)
    try:
        with p.open("rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        raise ValueError(f"cannot read config file {p}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"config file {p} is not valid TOML: {exc}") from None
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise ValueError(f"config file {p}: unknown keys {', '.join(unknown)}")
    for key, value in data.items():
        kind = _TOP_TYPES[key]
        if not _kind_ok(value, kind):
            what = f"{key} must be {_a(kind)}"
            if key == "protocol":
                what = "[protocol] must be a table"
            raise ValueError(f"config file {p}: {what}, got {value!r}")
    defaults = sds.Config().to_dict()
    for key, value in data.get("protocol", {}).items():
        if key in defaults and not _kind_ok(value, kind := _protocol_kind(defaults[key])):
            raise ValueError(
                f"config file {p}: [protocol] {key} must be {_a(kind)}, got {value!r}"
            )
    return data


def add_join_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``sdschat join``."""
    p.add_argument(
        "channel",
        nargs="?",
        default=None,
        help="channel to join (and to which typed lines go); without it (and without "
        "--invite): the last setup of the data directory, every channel it had joined, "
        "the one open last shown",
    )
    p.add_argument(
        "--create",
        action="store_true",
        help="create CHANNEL as a members channel with you as its admin (invite others "
        "with /invite; no passphrase)",
    )
    p.add_argument(
        "--invite",
        default=None,
        metavar="CODE",
        help="join the members channel of this invite code (from an admin's /invite); "
        "its relays are used unless --relay is given",
    )
    p.add_argument(
        "--link",
        default=None,
        metavar="CODE",
        help="make this a new device of yours: the code /link or 'sdschat link' shows on "
        "a device already set up (4821-tiger-river); into a new --data-dir, through "
        "--relay (the other device's relay); no channel: they come from the other device",
    )
    p.add_argument(
        "--device-name",
        default=None,
        metavar="NAME",
        help="with --link: this device's name in your device list (default: the host name)",
    )
    p.add_argument(
        "--relay",
        action="append",
        default=None,
        help="relay URL (ws://HOST:PORT of 'sdschat relay'); repeatable: the relays of one "
        "cluster, used one at a time, failing over to the next; without it, or a 'relay' in "
        "--config, the node uses LAN gossip",
    )
    p.add_argument(
        "--data-dir",
        default=None,
        help="this participant's data directory: identity key, SQLite database "
        "(default ~/.local/share/sdschat)",
    )
    p.add_argument(
        "--moved",
        action="store_true",
        help="the data directory was moved to another disk or restored from a backup, and "
        "the original is gone for good: take it as this device's (a copy is refused "
        "otherwise, exit status 7)",
    )
    p.add_argument("--name", default=None, help="display name shown to others")
    from app.launch.store_cmd import add_cafile_argument  # light: stdlib only

    add_cafile_argument(p)
    p.add_argument(
        "--passphrase-file",
        default=None,
        metavar="FILE",
        help="read the channel passphrase from FILE (first line). Without it the "
        "passphrase is prompted when interactive; no passphrase makes the channel "
        "PUBLIC: anyone who knows its name can read it",
    )
    p.add_argument(
        "--channel",
        action="append",
        default=[],
        metavar="NAME",
        dest="extra_channels",
        help="also join this channel (repeatable; same passphrase)",
    )
    p.add_argument("--headless", action="store_true", help="no TUI: lines on stdin, JSON on stdout")
    p.add_argument(
        "--config",
        default=None,
        metavar="FILE",
        help="TOML settings file (default: ~/.config/sdschat/config.toml when it exists)",
    )
    p.add_argument(
        "--no-config", action="store_true", help="read no config file, not even the default"
    )
    p.add_argument(
        "--profile",
        choices=sds.PROFILES,
        default=None,
        help="protocol sizes: default (sds.Config) or waku (js-waku's, for a channel "
        "shared with js-waku peers); default: the config file's, else default",
    )
    p.add_argument(
        "--fast",
        action="store_true",
        help="second-scale protocol timings (sds.Config.fast(1000)) for demos and tests",
    )
    for flag, fields_ in _TIMING_FLAGS.items():
        p.add_argument(
            "--" + flag.replace("_", "-"),
            type=int,
            default=None,
            metavar="MS",
            help=f"sds.Config.{fields_[0]} in milliseconds",
        )
    p.add_argument(
        "--drop-rate",
        type=float,
        default=None,
        metavar="P",
        help="FOR DEMOS AND TESTS: drop a fraction P (0 <= P < 1) of envelopes in each "
        "direction, to watch the protocol recover",
    )
    p.add_argument("--drop-seed", type=int, default=None, help="seed of --drop-rate's randomness")
    p.add_argument(
        "--new-history",
        action="store_true",
        help="start a new, empty history when the data directory's database is missing but "
        "its identity key is there (refused without this flag)",
    )
    p.add_argument(
        "--state-save-ms",
        type=int,
        default=None,
        metavar="MS",
        help="least interval between saves of the protocol state "
        f"(default {DEFAULT_STATE_SAVE_MS})",
    )


def settings_from_args(args: argparse.Namespace) -> NodeSettings:
    """Resolve :class:`NodeSettings` from parsed :func:`add_join_arguments` flags.

    Raises:
        ValueError: a bad config file or value (the message says which).
    """
    if getattr(args, "invite", None):
        if getattr(args, "create", False):
            raise ValueError("--invite and --create cannot be used together")
        from app.members.invite import decode_invite  # checks the code before anything

        invite = decode_invite(args.invite)
        if args.channel is None:
            args.channel = invite.channel
        if args.relay is None and invite.relays:
            args.relay = list(invite.relays)
    if getattr(args, "no_config", False):
        if args.config:
            raise ValueError("--config and --no-config cannot be used together")
    elif not args.config:
        default = default_config_path()
        if default.is_file():
            args.config = str(default)  # read by the TUI's keymap and the transport too
    data: dict[str, Any] = load_config_file(args.config) if args.config else {}
    # the channel (none named: the last setup's), the relays and store peers: the one
    # precedence rule of app/launch/last_setup.py
    start = apply_last_setup(args, data)
    for channel in [args.channel, *(getattr(args, "extra_channels", None) or [])]:
        check_channel_name(channel)  # all of them before any is joined
    fast = bool(args.fast or data.get("fast", False))
    scale = int(data.get("fast_scale_ms", 1000))
    profile = getattr(args, "profile", None) or data.get("profile", "default")
    config = sds.Config.profile(profile)  # ValueError names the known profiles
    if fast:
        config = config.with_fast_timings(scale)
    protocol = dict(data.get("protocol", {}))
    if protocol:
        known = set(sds.Config().to_dict())
        unknown = sorted(set(protocol) - known)
        if unknown:
            raise ValueError(f"unknown [protocol] keys: {', '.join(unknown)}")
        config = config.with_changes(**protocol)
    changes: dict[str, int] = {}
    for dest, fields_ in _TIMING_FLAGS.items():
        value = getattr(args, dest, None)
        if value is not None:
            for name in fields_:
                changes[name] = value
    if "resend_unacknowledged_ms" in changes:
        # Possibly-acknowledged messages are resent half as often (the protocol's ratio).
        changes["resend_possibly_acknowledged_ms"] = 2 * changes["resend_unacknowledged_ms"]
    if changes:
        try:
            config = config.with_changes(**changes)
        except ValueError as exc:
            raise ValueError(str(exc)) from None
    drop_rate = args.drop_rate if args.drop_rate is not None else float(data.get("drop_rate", 0))
    if not 0.0 <= drop_rate < 1.0:
        raise ValueError(f"--drop-rate must be in [0, 1), got {drop_rate}")
    relay = args.relay if args.relay is not None else data.get("relay", "ws://127.0.0.1:8765")
    relays = [relay] if isinstance(relay, str) else list(relay)
    for url in relays:
        check_ws_url(url, "--relay" if args.relay is not None else "relay (config file)")
    store = getattr(args, "store", None)
    store_flag = "--store"
    if store is None and data.get("store"):
        store, store_flag = data["store"], "store (config file)"
    if store is not None:  # every store URL, in order: the node fails over between them
        args.store = (store,) if isinstance(store, str) else tuple(store)
        for url in args.store:
            check_ws_url(url, store_flag)
    if getattr(args, "cafile", None) is not None:
        from net.tls import set_default_cafile

        set_default_cafile(args.cafile)  # every wss:// relay and store client of this process
    state_save = args.state_save_ms
    if state_save is None:
        state_save = data.get("state_save_ms", DEFAULT_STATE_SAVE_MS)
    if int(state_save) < 0:
        raise ValueError("--state-save-ms must be >= 0")
    recent_window = int(data.get("recent_window", DEFAULT_RECENT_WINDOW))
    if recent_window < 0:
        raise ValueError("recent_window must be >= 0")
    file_mib = {}
    for key, default_bytes in (("file_quota_mib", DEFAULT_FILE_QUOTA_BYTES),
                               ("file_channel_mib", DEFAULT_CHANNEL_FILE_BYTES)):  # fmt: skip
        mib = int(data.get(key, default_bytes // 2**20))
        if not 0 <= mib <= 2**20:
            raise ValueError(f"{key} must be between 0 and {2**20} (MiB), not {mib}")
        file_mib[key] = mib * 2**20
    return NodeSettings(
        config=config,
        relay=str(relays[0]),
        name=args.name or data.get("name"),
        drop_rate=float(drop_rate),
        drop_seed=args.drop_seed,
        state_save_ms=int(state_save),
        relays=tuple(relays),
        recent_window=recent_window,
        new_history=bool(getattr(args, "new_history", False)),
        file_quota_bytes=file_mib["file_quota_mib"],
        file_channel_bytes=file_mib["file_channel_mib"],
        start=start,
    )
