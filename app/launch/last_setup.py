"""The last setup of a data directory, and the one rule that decides what a start opens.

A start restores the whole setup, as WeeChat restores its servers and autojoin and a
Matrix client its rooms: the relays the last run used when a flag or an invite chose
them (and the store peers, the same way), every channel and direct conversation
joined and not left (``channels.json``, :mod:`app.launch.joined`), and the channel
that was open. ``DATA_DIR/setup.json`` (mode 0600) keeps the network and the open
channel::

    {"v": 1, "network": {"relays": ["ws://10.0.0.1:8765"], "lan": false,
                         "interfaces": []},
     "stores": ["ws://10.0.0.1:8766"], "open": "team"}

**What a start uses** (:func:`apply_last_setup`, the only place that decides it;
first match wins):

=====================================  ===================================================
the network (relays, LAN)              the store peers
=====================================  ===================================================
1. ``--invite CODE`` (its relays,      1. ``--store URL`` (repeatable)
   unless ``--relay``)                 2. the last run's (``setup.json``)
2. ``--relay``, ``--lan``,             3. the config file's ``store``
   ``--interface``                     4. a store announced on the LAN
3. the last run's (``setup.json``)
4. the config file's ``relay``
5. LAN gossip
=====================================  ===================================================

``sdschat join --link CODE`` (app/launch/link_join.py) writes the other device's
``setup.json`` into the new data directory and then starts as a restore: its
relays and store peers are "the last run's", unless a flag chooses.

The last run's network is the one the last run chose by flag or invite (one that
came from the config file, or LAN by default, is not written: the config file
remembers itself). ``sdschat join`` without a channel opens the last setup: the
channel that was open (else the first remembered) and every other one; with no
last setup it stops with what to type instead (exit 2).

A file that cannot be read is ignored (as a first start); one that cannot be written
loses only what it would have kept.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.launch.data_dir import default_data_dir
from app.launch.joined import load_remembered
from app.members.private_file import write_private

__all__ = [
    "SETUP_FILE",
    "LastSetup",
    "StartPlan",
    "apply_last_setup",
    "load_setup",
    "record_open",
    "record_start",
]

SETUP_FILE = "setup.json"
"""The last run's network, store peers and open channel, in the data directory."""

NO_SETUP = (
    "name a channel to join: this data directory has no last setup to open yet. "
    "Type: sdschat join CHANNEL (a passphrase or PUBLIC channel), "
    "sdschat join CHANNEL --create (a members channel of yours) or "
    "sdschat join --invite CODE (someone's)"
)


@dataclass(frozen=True)
class LastSetup:
    """What ``setup.json`` holds (empty: a first start)."""

    relays: tuple[str, ...] = ()
    lan: bool = False
    interfaces: tuple[str, ...] = ()
    network: bool = False
    """Whether a network was kept (else the config file or LAN decide)."""
    stores: tuple[str, ...] = ()
    open: str | None = None


def _strings(value: object) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def load_setup(data_dir: Path) -> LastSetup:
    """The last setup kept in ``data_dir`` (an unreadable file: none)."""
    try:
        doc = json.loads((data_dir / SETUP_FILE).read_text("utf-8"))
    except (OSError, ValueError):
        return LastSetup()
    if not isinstance(doc, dict):
        return LastSetup()
    net = doc.get("network")
    opened = doc.get("open")
    if not isinstance(net, dict):
        net = None
    return LastSetup(
        relays=_strings(net.get("relays")) if net else (),
        lan=bool(net.get("lan", False)) if net else False,
        interfaces=_strings(net.get("interfaces")) if net else (),
        network=net is not None,
        stores=_strings(doc.get("stores")),
        open=opened if isinstance(opened, str) else None,
    )


def _write(data_dir: Path, setup: LastSetup) -> None:
    doc: dict[str, Any] = {"v": 1}
    if setup.network:
        doc["network"] = {"relays": list(setup.relays), "lan": setup.lan,
                          "interfaces": list(setup.interfaces)}  # fmt: skip
    if setup.stores:
        doc["stores"] = list(setup.stores)
    if setup.open is not None:
        doc["open"] = setup.open
    write_private(data_dir / SETUP_FILE, json.dumps(doc).encode("utf-8"))


@dataclass
class StartPlan:
    """What :func:`apply_last_setup` decided for this start."""

    data_dir: Path
    restore: bool = False
    """``sdschat join`` without a channel: the last setup is opened."""
    network_from: str = "LAN"
    """``invite``, ``flags``, ``last run``, ``config file`` or ``LAN``."""
    store_from: str = ""
    """``flags``, ``last run``, or "" (none chosen)."""
    keep: LastSetup = field(default_factory=LastSetup)
    """What :func:`record_start` writes once the start succeeded."""

    @property
    def note(self) -> str:
        """What the front ends say about a network or store taken from the last run."""
        parts = []
        if self.network_from == "last run":
            parts.append("the relays" if self.keep.relays else "the LAN")
        if self.store_from == "last run":
            parts.append("the store peer")
        if not parts:
            return ""
        return f"{' and '.join(parts)} of the last run (--relay, --lan or --store change it)"


def apply_last_setup(args: argparse.Namespace, config: dict[str, Any]) -> StartPlan:
    """Fill in parsed ``sdschat join`` flags from the last setup, by the rule of the module
    docstring: ``args.channel`` (none named: the last open one), ``args.relay``,
    ``args.lan``, ``args.interface`` and ``args.store``; call it after ``--invite`` has
    set the channel and relays it names.

    Raises:
        ValueError: no channel named and no last setup to open (the message says what
            to type instead).
    """
    given = getattr(args, "data_dir", None)
    data_dir = Path(given).expanduser() if given else default_data_dir()
    last = load_setup(data_dir)
    plan = StartPlan(data_dir)
    if args.channel is None:
        if getattr(args, "create", False):
            raise ValueError("--create needs the name of the channel to make")
        names = [r.name for r in load_remembered(data_dir)]
        if not names:
            raise ValueError(NO_SETUP)
        args.channel = last.open if last.open in names else names[0]
        plan.restore = True
    invited = bool(getattr(args, "invite", None))
    flags = (getattr(args, "relay", None) is not None or bool(getattr(args, "lan", False))
             or bool(getattr(args, "interface", None)))  # fmt: skip
    if invited or flags:
        plan.network_from = "invite" if invited else "flags"
        relays = args.relay if args.relay is not None else []
        network = LastSetup(tuple([relays] if isinstance(relays, str) else relays),
                            bool(getattr(args, "lan", False)),
                            tuple(getattr(args, "interface", None) or ()), True)  # fmt: skip
    elif last.network:
        plan.network_from = "last run"
        args.relay = list(last.relays) if last.relays else None
        args.lan = last.lan
        args.interface = list(last.interfaces)
        network = last
    else:
        plan.network_from = "config file" if config.get("relay") else "LAN"
        network = LastSetup()
    stores: tuple[str, ...] = ()
    given_stores = getattr(args, "store", None)  # --store is repeatable: a list
    if given_stores is not None:
        plan.store_from = "flags"
        stores = (given_stores,) if isinstance(given_stores, str) else tuple(given_stores)
    elif last.stores:
        plan.store_from, stores = "last run", last.stores
        args.store = list(last.stores)  # all of them, in order: the node fails over
    plan.keep = LastSetup(network.relays, network.lan, network.interfaces, network.network,
                          stores, last.open)  # fmt: skip
    return plan


def record_start(plan: StartPlan) -> None:
    """The start succeeded: keep its network and store peers for the next one (what came
    from the config file or the default is not written). A failure to write is
    ignored: only the restore of this is lost."""
    keep = plan.keep
    last = load_setup(plan.data_dir)
    if not keep.network:  # the config file's relay or LAN by default: the last run's stays
        keep = LastSetup(last.relays, last.lan, last.interfaces, last.network, keep.stores,
                         last.open)  # fmt: skip
    if keep == last:
        return
    with contextlib.suppress(OSError):
        _write(plan.data_dir, LastSetup(keep.relays, keep.lan, keep.interfaces, keep.network,
                                        keep.stores, last.open))  # fmt: skip


def record_open(data_dir: Path, channel: str | None) -> None:
    """The channel shown now (``sdschat join`` without a channel opens it next time)."""
    last = load_setup(data_dir)
    if channel is None or last.open == channel:
        return
    with contextlib.suppress(OSError):
        _write(data_dir, LastSetup(last.relays, last.lan, last.interfaces, last.network,
                                   last.stores, channel))  # fmt: skip
