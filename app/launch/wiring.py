"""What a node of ``sdschat join`` is started with, from its flags: the transport (a
relay, LAN gossip, both bridged; lossy for demos) and the node's options. The TUI
(:mod:`app.tui.run`) and headless mode (:mod:`app.headless.run`) both call
:func:`wire_transport` and :func:`node_options`; what differs between them (where LAN
peers and stores are reported) comes in as callbacks.

Which network (:mod:`net.lan.flags`): LAN gossip unless a relay was chosen (``--relay``
or ``relay`` in the config file); both, bridged, with ``--relay … --lan``. With
``drop_rate`` above 0 (FOR DEMOS AND TESTS) a :class:`~app.node.transport.LossyTransport`
wraps whatever was chosen.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sds
from app.launch.settings import NodeSettings
from app.node.runtime import NodeOptions
from app.node.transport import LossyTransport, RelayTransport, Transport
from net.lan.flags import build_transport, relay_given
from net.urls import display_address

__all__ = ["Wired", "node_options", "relay_label", "wire_transport"]


@dataclass(frozen=True)
class Wired:
    """The transport chosen by the flags, and what the front ends say about it."""

    transport: Transport
    """What the node sends and receives through (lossy when ``drop_rate`` > 0)."""
    lan: Any | None
    """The LAN gossip transport inside it (``net.lan.transport.LanTransport``), or None."""
    relay_url: str | None
    """The first relay's URL when a relay was chosen, else None."""
    invite_relays: tuple[str, ...]
    """The relays an ``/invite`` code names: those chosen, none for LAN gossip alone."""
    label: str
    """How the status bar names it: ``relay 127.0.0.1:8765 (+1)``, ``LAN + relay …``,
    ``LAN``, with `` (dropping 10%)`` when lossy."""


def relay_label(url: str) -> str:
    """``relay 127.0.0.1:8765`` for the status bar."""
    return f"relay {display_address(url)}"


def wire_transport(
    args: argparse.Namespace,
    settings: NodeSettings,
    *,
    config: dict[str, Any],
    on_peer: Callable[[Any], None] | None = None,
    on_store: Callable[[str, bool], None] | None = None,
) -> Wired:
    """The node's transport for ``sdschat join``'s flags, the config file ``config``
    and the resolved ``settings``; LAN peers and stores announced on the LAN go to
    ``on_peer`` and ``on_store``.

    Raises:
        ValueError: a bad ``--interface`` or ``--lan-port``.
    """
    transport: Transport
    transport, lan = build_transport(
        args,
        settings.relay,
        lambda _url: RelayTransport(settings.relays or settings.relay),
        config=config,
        on_peer=on_peer,
        on_store=on_store,
    )
    chosen = relay_given(args, config)
    label = relay_label(settings.relay) if chosen else ""
    if label and len(settings.relays) > 1:
        label += f" (+{len(settings.relays) - 1})"
    if lan is not None:
        label = f"LAN + {label}" if label else "LAN"
    if settings.drop_rate > 0:
        transport = LossyTransport(transport, settings.drop_rate, random.Random(settings.drop_seed))
        label += f" (dropping {settings.drop_rate:.0%})"
    return Wired(
        transport=transport,
        lan=lan,
        relay_url=settings.relay if chosen else None,
        invite_relays=(settings.relays or (settings.relay,)) if chosen else (),
        label=label,
    )


def node_options(
    settings: NodeSettings,
    *,
    store_url: str | tuple[str, ...] | None,
    config: sds.Config | None = None,
) -> NodeOptions:
    """The node's options from ``settings`` (``config``: other protocol settings than
    ``settings.config``, e.g. the TUI's smaller log window)."""
    return NodeOptions(
        config=settings.config if config is None else config,
        state_save_interval_ms=settings.state_save_ms,
        store_url=store_url,
        recent_window=settings.recent_window,
        new_history=settings.new_history,
        file_quota_bytes=settings.file_quota_bytes,  # app/chat/file_quota.py
        file_channel_bytes=settings.file_channel_bytes,
    )
