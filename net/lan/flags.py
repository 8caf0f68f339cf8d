"""The ``sdschat join`` flags for LAN gossip and a store peer, and choosing the transport.

Which network a node uses:

=================================  ============================================
flags                              transport
=================================  ============================================
(neither ``--relay`` nor config)   LAN gossip (the default: no server needed)
``--relay URL``                    the relay only
``--relay URL --lan``              LAN gossip and the relay, bridged
``--interface IP`` (repeatable)    implies ``--lan``; discovery and gossip use
                                   only those addresses (default: all)
=================================  ============================================

``--store URL`` adds a store peer for catching up and fetching missing
messages; without it a node on the LAN uses a store announced there.

Light at import (stdlib only): ``sdschat --help`` imports it.
"""

from __future__ import annotations

import argparse
import ipaddress
from collections.abc import Callable
from typing import Any

__all__ = ["add_join_network_arguments", "build_transport", "lan_wanted", "relay_given"]


def add_join_network_arguments(p: argparse.ArgumentParser) -> None:
    """``--lan``, ``--interface``, ``--lan-port``, ``--store`` for ``sdschat join``."""
    p.add_argument(
        "--lan",
        action="store_true",
        help="LAN gossip (zeroconf discovery, no server): the default when no --relay is "
        "given; with --relay both run and are bridged",
    )
    p.add_argument(
        "--interface",
        action="append",
        default=[],
        metavar="IP",
        help="IPv4 address LAN discovery and gossip use (repeatable; implies --lan; "
        "default: all interfaces)",
    )
    p.add_argument(
        "--lan-port",
        type=int,
        default=0,
        metavar="PORT",
        help="LAN gossip TCP port (default: any free port)",
    )
    p.add_argument(
        "--store",
        action="append",
        default=None,
        metavar="URL",
        help="store peer (ws://HOST:PORT of 'sdschat store --listen') to catch up from after "
        "being away and to fetch missing messages from; repeatable: store peers used one at "
        "a time, failing over to the next; on the LAN a store announced there is used when "
        "this is not given",
    )


def relay_given(args: argparse.Namespace, config: dict[str, Any] | None = None) -> bool:
    """Whether the user chose a relay (``--relay`` or ``relay`` in the config file)."""
    return getattr(args, "relay", None) is not None or bool((config or {}).get("relay"))


def lan_wanted(args: argparse.Namespace, config: dict[str, Any] | None = None) -> bool:
    """Whether LAN gossip runs: asked for, implied by ``--interface``, or no relay chosen."""
    return bool(
        getattr(args, "lan", False)
        or getattr(args, "interface", None)
        or not relay_given(args, config)
    )


def _check_interfaces(values: list[str]) -> tuple[str, ...] | None:
    for v in values:
        try:
            ipaddress.IPv4Address(v)
        except ValueError:
            raise ValueError(f"--interface needs an IPv4 address, got {v!r}") from None
    return tuple(values) or None


def build_transport(
    args: argparse.Namespace,
    relay_url: str,
    make_relay: Callable[[str], Any],
    *,
    config: dict[str, Any] | None = None,
    on_peer: Callable[[Any], None] | None = None,
    on_store: Callable[[str, bool], None] | None = None,
) -> tuple[Any, Any | None]:
    """The node's transport for these flags, and the LAN transport inside it (or ``None``).

    Args:
        args: parsed ``sdschat join`` flags.
        relay_url: the resolved relay URL (used only when a relay was chosen).
        make_relay: builds the relay transport (``app.node.transport.RelayTransport``).
        config: the parsed config file, if any.
        on_peer, on_store: LAN peer and LAN store callbacks.

    Raises:
        ValueError: a bad ``--interface`` or ``--lan-port``.
    """
    interfaces = _check_interfaces(list(getattr(args, "interface", []) or []))
    port = int(getattr(args, "lan_port", 0) or 0)
    if not 0 <= port <= 65535:
        raise ValueError(f"--lan-port out of range: {port}")
    use_relay = relay_given(args, config)
    if not lan_wanted(args, config):
        return make_relay(relay_url), None
    from net.lan.transport import LanOptions, LanTransport

    lan = LanTransport(
        LanOptions(interfaces=interfaces, port=port), on_peer=on_peer, on_store=on_store
    )
    if not use_relay:
        return lan, lan
    from net.lan.bridge import BridgeTransport

    return BridgeTransport([lan, make_relay(relay_url)], ["lan", "relay"]), lan
