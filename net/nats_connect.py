"""One way to connect to NATS, for every part of sdschat that uses it (the relay cluster,
the JetStream-backed store).

:class:`NatsConnector` connects to the servers of one NATS cluster with the same
rules wherever it is used, the flag names aside (``--cluster`` of ``sdschat
relay``, ``--jetstream`` of ``sdschat store``; :class:`NatsSettings`):

* **Credentials** come as ``USER:PASSWORD@`` or ``TOKEN@`` in the URLs, or a token
  read from a file (``--…-token-file``: a URL on the command line is visible to
  ``ps``). They are never logged: URLs go through :func:`net.urls.redact_url`.
* **TLS** is used whenever a server requires it. With a ``tls://`` URL or a CA or
  client certificate given (``--…-cafile``, ``--…-certfile``/``--…-keyfile``), a
  server that does not use TLS is refused and the credentials are not sent to it:
  nats-py decides on TLS from the server's first message and would then send URL
  credentials in clear, so they are handed over through a check that runs once
  the server's INFO is known.
* **A refusal that retrying cannot cure** (wrong credentials, a certificate not
  trusted, a client certificate missing, TLS asked for and absent) stops
  :meth:`NatsConnector.connect` at once with :class:`NatsUnavailable` saying so in
  one sentence; no server reachable within ``connect_timeout`` does too. Once
  connected, the client reconnects for ever (the first server of the list
  first: list the nearest first).

What may go without credentials is decided before anything connects, by
:func:`net.relay_config.insecure_nats_urls` (loopback only, unless the
``--…-insecure`` flag).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import nats
from nats.aio.client import Client as NatsClient

from net.errors import NetError
from net.urls import redact_url

__all__ = [
    "NatsConnector",
    "NatsSettings",
    "NatsUnavailable",
    "TlsMissing",
    "server_name",
    "server_tls",
]


class NatsUnavailable(NetError, ConnectionError):
    """No NATS server of the list could be used when connecting (unreachable within the
    timeout, or refused for a reason retrying cannot cure). An ``OSError``, like a
    port that cannot be bound: what needed NATS does not start."""


@dataclass(frozen=True)
class NatsSettings:
    """How to reach one NATS cluster.

    Attributes:
        servers: ``nats://`` or ``tls://`` URLs, possibly with ``USER:PASSWORD@`` or
            ``TOKEN@``, tried in this order.
        cafile: PEM CA certificates to verify the servers with (TLS).
        certfile: PEM client certificate (TLS); ``keyfile`` its key.
        token_file: a file holding the authentication token.
        connect_timeout: seconds :meth:`NatsConnector.connect` tries before giving up.
        reconnect_wait: seconds between reconnection attempts to one server.
        flag: the command-line flag the URLs came from (``--cluster``, ``--jetstream``),
            for messages that name the flag to fix.
    """

    servers: tuple[str, ...]
    cafile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    token_file: str | None = None
    connect_timeout: float = 10.0
    reconnect_wait: float = 0.5
    flag: str = "--cluster"

    def __post_init__(self) -> None:
        if not self.servers:
            raise ValueError(f"{self.flag} needs at least one NATS server URL")

    @property
    def wants_tls(self) -> bool:
        """TLS was asked for: a ``tls://`` URL, a CA or a client certificate."""
        return (self.cafile is not None or self.certfile is not None
                or any(s.startswith("tls://") for s in self.servers))  # fmt: skip

    def redacted(self) -> list[str]:
        """The server URLs as they may be logged."""
        return [redact_url(s) for s in self.servers]


ErrorCallback = Callable[[Exception], Awaitable[None]]
EventCallback = Callable[[], Awaitable[None]]


class NatsConnector:
    """Connects one nats-py client by the rules of the module docstring.

    Args:
        settings: the servers, TLS and credentials.
        on_error: nats-py's errors once connected (not while :meth:`connect` runs: its
            refusals are what it raises).
        on_disconnected, on_reconnected: connection changes once connected.
    """

    def __init__(
        self,
        settings: NatsSettings,
        *,
        on_error: ErrorCallback | None = None,
        on_disconnected: EventCallback | None = None,
        on_reconnected: EventCallback | None = None,
    ) -> None:
        self.settings = settings
        self._on_error_cb = on_error
        self._on_disconnected_cb = on_disconnected
        self._on_reconnected_cb = on_reconnected
        self._fatal: asyncio.Future[str] | None = None  # set while connect() runs
        self._start_error: str | None = None  # the last error while connect() runs
        self.closing = False
        """Set by the owner before it closes the client (no disconnect callbacks then)."""

    async def connect(self, name: str, *, no_echo: bool = False, **extra: Any) -> NatsClient:
        """A connected client (reconnecting for ever from now on).

        Raises:
            NatsUnavailable: see the module docstring (one sentence, no secret in it).
        """
        s = self.settings
        options: dict[str, Any] = dict(extra)
        tls = self._tls_context()
        if tls is not None:
            options["tls"] = tls
        nc = NatsClient()
        urls, user, password = list(s.servers), None, None
        if s.wants_tls:
            # nats-py decides on TLS from the server's INFO and would then send URL
            # credentials in plain text: hand them over through a check instead
            urls, user, password = _without_credentials(list(s.servers))
        if s.token_file is not None:
            user, password = self._read_token(s.token_file), None
        if user is not None:
            key = "user" if password is not None else "token"
            options[key] = self._guard(nc, user)
            if password is not None:
                options["password"] = self._guard(nc, password)
        _quiet_asyncio_ssl_eof()
        fatal: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._fatal = fatal
        servers = ", ".join(s.redacted())
        connecting = asyncio.ensure_future(
            nc.connect(
                servers=urls,
                name=name,
                no_echo=no_echo,
                dont_randomize=True,  # the operator's order: nearest server first
                allow_reconnect=True,
                max_reconnect_attempts=-1,
                reconnect_time_wait=s.reconnect_wait,  # type: ignore[arg-type]
                connect_timeout=2,
                ping_interval=10,
                max_outstanding_pings=3,
                error_cb=self._on_error,
                disconnected_cb=self._on_disconnected,
                reconnected_cb=self._on_reconnected,
                **options,
            )
        )
        failure: str | None = None
        try:
            async with asyncio.timeout(s.connect_timeout):
                await asyncio.wait((connecting, fatal), return_when=asyncio.FIRST_COMPLETED)
            if fatal.done():  # a refusal that retrying cannot cure
                failure = fatal.result()
            else:
                connecting.result()
                if s.wants_tls and not server_tls(nc):
                    # nats-py speaks TLS only when the server asks for it: never plain text
                    failure = (
                        f"the NATS server {server_name(nc)} does not use TLS, though TLS was "
                        f"asked for (tls:// or {s.flag}-cafile/{s.flag}-certfile); configure "
                        f"TLS on it, and change the credentials if any were given (they "
                        f"crossed in clear)"
                    )
        except TlsMissing as exc:
            failure = str(exc)
        except (TimeoutError, OSError, nats.errors.Error) as exc:
            last = f"{type(exc).__name__}: {exc}"
            if isinstance(exc, TimeoutError) and self._start_error is not None:
                last = self._start_error
            failure = (
                f"no NATS server of {servers} answered within "
                f"{s.connect_timeout:g}s ({last})"
            )
        finally:
            if failure is not None or not connecting.done():
                connecting.cancel()
                # bounded: nats-py's connect loop (reconnecting for ever) may swallow
                # the cancellation; an unbounded await here hung a test for 600 s
                await asyncio.wait({connecting}, timeout=2.0)
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(nc.close(), 2.0)
            self._fatal = None
        if failure is not None:
            raise NatsUnavailable(failure)
        return nc

    # ------------------------------------------------------------------ internals

    def _tls_context(self) -> ssl.SSLContext | None:
        """The TLS context when a TLS file is given (None: nats-py's default, the system
        store, for ``tls://`` URLs and servers that require TLS)."""
        s = self.settings
        if s.cafile is None and s.certfile is None:
            return None
        try:
            ctx = ssl.create_default_context(cafile=s.cafile)
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            raise NatsUnavailable(f"cannot load {s.flag}-cafile {s.cafile}: {exc}") from None
        if s.certfile is not None:
            try:
                ctx.load_cert_chain(s.certfile, s.keyfile)
            except (OSError, ValueError) as exc:
                raise NatsUnavailable(
                    f"cannot load {s.flag}-certfile {s.certfile}"
                    f"{f' / {s.flag}-keyfile {s.keyfile}' if s.keyfile else ''}: {exc}"
                ) from None
        return ctx

    def _guard(self, nc: NatsClient, secret: str) -> Callable[[], str]:
        """``secret`` for nats-py's CONNECT, refused to a server not using TLS when TLS
        was asked for (nats-py asks for it after reading the server's INFO)."""
        wants_tls = self.settings.wants_tls

        def give() -> str:
            if wants_tls and not server_tls(nc):
                raise TlsMissing(server_name(nc), self.settings.flag)
            return secret

        return give

    def _read_token(self, path: str) -> str:
        flag = f"{self.settings.flag}-token-file"
        try:
            with open(path, encoding="utf-8") as f:
                token = f.read().strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise NatsUnavailable(f"cannot read {flag} {path}: {exc}") from None
        if not token or any(c.isspace() for c in token):
            raise NatsUnavailable(
                f"{flag} {path} must hold one token (no spaces), got "
                f"{'nothing' if not token else 'several words'}"
            )
        return token

    async def _on_error(self, exc: Exception) -> None:
        fatal = self._fatal
        if fatal is not None:  # connect() is running: it reports, in one line
            reason = _refusal(exc, self.settings)
            if reason is not None and not fatal.done():
                fatal.set_result(reason)
            self._start_error = f"{type(exc).__name__}: {exc}"
            return
        if self._on_error_cb is not None:
            await self._on_error_cb(exc)

    async def _on_disconnected(self) -> None:
        if not self.closing and self._fatal is None and self._on_disconnected_cb is not None:
            await self._on_disconnected_cb()

    async def _on_reconnected(self) -> None:
        if self._on_reconnected_cb is not None:
            await self._on_reconnected_cb()


class TlsMissing(NetError, nats.errors.Error):
    """A NATS server without TLS where TLS was asked for: no credential is sent to it."""

    def __init__(self, server: str | None, flag: str = "--cluster") -> None:
        super().__init__(
            f"the NATS server {server} does not use TLS, though TLS was asked for (tls:// or "
            f"{flag}-cafile/{flag}-certfile); no credential was sent to it"
        )
        self.server = server

    def __str__(self) -> str:
        return str(self.args[0])


def _without_credentials(urls: list[str]) -> tuple[list[str], str | None, str | None]:
    """``(urls without USER:PASSWORD@, user, password)`` when every URL carries the same
    credentials (a lone user part is a token: password None); else the URLs unchanged."""
    infos = {u.partition("://")[2].partition("/")[0].rpartition("@")[0] for u in urls}
    if len(infos) != 1 or not (info := infos.pop()):
        return list(urls), None, None
    stripped = []
    for u in urls:
        scheme, _, rest = u.partition("://")
        authority, slash, path = rest.partition("/")
        stripped.append(f"{scheme}://{authority.rpartition('@')[2]}{slash}{path}")
    user, colon, password = info.partition(":")
    return stripped, user, password if colon else None


def _refusal(exc: BaseException, s: NatsSettings) -> str | None:
    """What to tell the operator when a NATS server refuses us for a reason that
    retrying cannot cure (credentials, certificates); None for any other error."""
    text = str(exc)
    if isinstance(exc, TlsMissing):
        return text
    if isinstance(exc, nats.errors.AuthorizationError) or "authorization violation" in (
        text.lower()
    ):
        return (
            f"the NATS server refused the credentials (Authorization Violation): check the "
            f"USER:PASSWORD@ or TOKEN@ of {s.flag}, or {s.flag}-token-file"
        )
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (
            f"TLS certificate of the NATS server not accepted ({exc.verify_message}); "
            f"if it uses a private CA, give its certificate with {s.flag}-cafile"
        )
    if isinstance(exc, ssl.SSLError) and any(
        alert in text for alert in ("CERTIFICATE_REQUIRED", "BAD_CERTIFICATE", "UNKNOWN_CA")
    ):
        if s.certfile is None:
            return (
                f"the NATS server requires a TLS client certificate ({exc.reason}): give one "
                f"with {s.flag}-certfile and {s.flag}-keyfile"
            )
        return f"the NATS server refused our TLS client certificate ({exc.reason})"
    return None


def server_tls(nc: NatsClient) -> bool:
    """Whether the server ``nc`` is connected to requires TLS (its INFO says so)."""
    info = getattr(nc, "_server_info", None) or {}
    return bool(info.get("tls_required"))


def server_name(nc: NatsClient) -> str | None:
    """``host:port`` of the server ``nc`` is connected to."""
    url = nc.connected_url
    return None if url is None else f"{url.hostname}:{url.port}"


_SSL_EOF_NOISE = "returning true from eof_received() has no effect when using ssl"


class _DropSslEofNoise(logging.Filter):
    """asyncio warns on stderr, in plain text between the JSON log lines, each time
    nats-py's TLS connection is closed by the server; it means nothing to an operator."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != _SSL_EOF_NOISE


def _quiet_asyncio_ssl_eof() -> None:
    log = logging.getLogger("asyncio")
    if not any(isinstance(f, _DropSslEofNoise) for f in log.filters):
        log.addFilter(_DropSslEofNoise())
