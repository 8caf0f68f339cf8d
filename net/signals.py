"""Waiting for the signal that ends a server process (`sdschat relay`, `sdschat store`)."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from contextlib import nullcontext

from net.tls import reload_on_sighup

__all__ = ["StopSignals"]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopSignals:
    """SIGINT and SIGTERM caught from :meth:`install` on, so that a server installs
    them before it starts: a signal that comes while it starts (after it logged that it
    listens, say) is a clean stop too, not the default death by signal.

    :meth:`stopped` returns the first signal's name (at once if it came already) and
    gives the signals their default behaviour back; :meth:`remove` does that alone (a
    server that could not start). Call it from the running loop.
    """

    def __init__(self) -> None:
        self._stop = asyncio.Event()
        self._received: list[str] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    def install(self) -> StopSignals:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            for sig in STOP_SIGNALS:
                self._loop.add_signal_handler(sig, self._on_signal, sig)
        return self

    def _on_signal(self, sig: signal.Signals) -> None:
        self._received.append(sig.name)
        self._stop.set()

    async def stopped(self, reload_tls: Callable[[], object] | None = None) -> str:
        """The first stop signal's name, once it came (at once if it came already); the
        signals then have their default behaviour back, so a second one during the
        shutdown that follows ends the process.

        With ``reload_tls`` (a TLS server), SIGHUP reloads the certificate meanwhile;
        without it SIGHUP keeps its usual meaning (the terminal or tmux session closed:
        stop), so a server in a closed tmux pane (`sdschat demo --stop`) does not linger.
        """
        with reload_on_sighup(reload_tls) if reload_tls is not None else nullcontext():
            await self._stop.wait()
        self.remove()
        return self._received[0]

    def remove(self) -> None:
        if self._loop is not None:
            for sig in STOP_SIGNALS:
                self._loop.remove_signal_handler(sig)
            self._loop = None
