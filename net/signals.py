"""Waiting for the signal that ends a server process (`sdschat relay`, `sdschat store`)."""

from __future__ import annotations

import asyncio
import signal

__all__ = ["wait_for_stop_signal"]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


async def wait_for_stop_signal() -> str:
    """Wait in the running loop until SIGINT or SIGTERM arrives; returns its name.

    The handlers are installed for the duration of the wait only; the caller
    shuts down cleanly afterwards (a second signal during shutdown gets the
    default behaviour again).
    """
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    received: list[str] = []

    def on_signal(sig: signal.Signals) -> None:
        received.append(sig.name)
        stop.set()

    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        await stop.wait()
    finally:
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)
    return received[0]
