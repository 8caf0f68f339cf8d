"""TLS for ``sdschat relay`` and ``sdschat store`` (``wss://``), and for their clients.

Servers (:class:`ServerTLS`): ``--certfile`` (PEM certificate chain, the
server's certificate first) and ``--keyfile`` (its PEM private key; omitted
when the certificate file holds the key too). :meth:`ServerTLS.reload` reads
both files again into the same :class:`ssl.SSLContext`: connections accepted
afterwards present the new certificate, open connections keep theirs. The
servers call it on SIGHUP (a renewed certificate needs no restart); a file
that does not load leaves the previous certificate in use and is logged.

Clients (:func:`client_context`): a ``wss://`` URL is verified against the
system's trust store, or only against ``cafile`` when one is given
(``--cafile`` of ``sdschat join`` and ``sdschat store``; a process-wide
default set once by the command line with :func:`set_default_cafile`).
Hostname checking is always on.

:func:`explain_failure` turns what a mismatched scheme produces (a TLS
handshake against a plain server, a plain request against a TLS server, a
certificate that does not verify) into a sentence that says what to change.

Stdlib only at import, so ``sdschat --help`` stays fast.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import ssl
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

from net.errors import NetError

__all__ = [
    "ServerTLS",
    "TLSFilesError",
    "client_context",
    "default_cafile",
    "explain_failure",
    "reload_on_sighup",
    "set_default_cafile",
]

_default_cafile: str | None = None


def set_default_cafile(path: str | None) -> None:
    """Use ``path`` (PEM CA certificates) for every ``wss://`` client of this process.

    Raises:
        ValueError: ``path`` is not a readable file of PEM certificates.
    """
    global _default_cafile
    if path is not None:
        _check_cafile(path)
    _default_cafile = path


def default_cafile() -> str | None:
    """The CA file set by :func:`set_default_cafile` (None: the system trust store)."""
    return _default_cafile


def _check_cafile(path: str) -> None:
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"--cafile {path}: no such file")
    try:
        ssl.create_default_context(cafile=str(p))
    except (ssl.SSLError, OSError) as exc:
        raise ValueError(f"--cafile {path}: not PEM CA certificates ({exc})") from None


def client_context(url: str, cafile: str | None = None) -> ssl.SSLContext | None:
    """The TLS context for connecting to ``url``: None for ``ws://``.

    ``cafile`` (else :func:`default_cafile`) replaces the system trust store.
    """
    if not url.startswith("wss://"):
        return None
    ca = cafile if cafile is not None else _default_cafile
    return ssl.create_default_context(cafile=ca)


class TLSFilesError(NetError, OSError):
    """A certificate or key file that cannot be used (names the file and why)."""


def _load(context: ssl.SSLContext, certfile: str, keyfile: str | None) -> None:
    for flag, path in (("--certfile", certfile), ("--keyfile", keyfile)):
        if path is not None and not Path(path).is_file():
            raise TLSFilesError(f"{flag} {path}: no such file")
    try:
        context.load_cert_chain(certfile, keyfile)
    except ssl.SSLError as exc:
        what = f"--certfile {certfile}" + (f" / --keyfile {keyfile}" if keyfile else "")
        raise TLSFilesError(
            f"{what}: not a PEM certificate chain with its matching private key "
            f"({exc.reason or exc})"
        ) from None
    except OSError as exc:
        raise TLSFilesError(f"--certfile {certfile}: {exc.strerror or exc}") from None


class ServerTLS:
    """A server's TLS context, reloadable from its files.

    Raises (constructor and :meth:`reload`):
        TLSFilesError: a file is missing or unreadable, not PEM, or the key
            does not match the certificate.
    """

    def __init__(self, certfile: str, keyfile: str | None = None) -> None:
        self.certfile = certfile
        self.keyfile = keyfile
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.reloads = 0
        _load(self.context, certfile, keyfile)

    def reload(self) -> None:
        """Load the files again; new connections use what they hold now.

        On failure the context keeps the previous certificate (OpenSSL checks
        the pair before replacing it) and the exception propagates.
        """
        _load(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), self.certfile, self.keyfile)  # check apart
        _load(self.context, self.certfile, self.keyfile)
        self.reloads += 1


def _host(url: str) -> str:
    return urlsplit(url).netloc or url


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in out and len(out) < 8:
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def explain_failure(url: str, exc: BaseException) -> str | None:
    """A clear sentence for a connection failure caused by TLS, or None if it is not one.

    * ``wss://`` to a plain server: "... does not speak TLS ... use ws://";
    * ``ws://`` to a TLS server: "... answered with TLS ... use wss://";
    * an untrusted or mismatched certificate: what failed and ``--cafile``.
    """
    where = _host(url)
    chain = _chain(exc)
    for e in chain:
        if isinstance(e, ssl.SSLCertVerificationError):
            why = e.verify_message or e.reason or str(e)
            return (
                f"TLS certificate of {where} not accepted ({why}); if the server uses a "
                "private CA, give its certificate with --cafile"
            )
    if url.startswith("wss://"):
        for e in chain:
            if isinstance(e, ssl.SSLError) and not isinstance(e, ssl.SSLCertVerificationError):
                reason = (e.reason or "").upper()
                if reason in (
                    "WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG",
                    "UNKNOWN_PROTOCOL", "HTTP_REQUEST", "RECORD_TOO_LARGE",
                ) or isinstance(e, ssl.SSLEOFError | ssl.SSLZeroReturnError):
                    return (
                        f"TLS handshake with {where} failed: it does not speak TLS "
                        f"(a plain ws:// server); use ws://{where}"
                    )
                return f"TLS handshake with {where} failed: {e.reason or e}"
            if isinstance(e, ConnectionResetError | EOFError | BrokenPipeError):
                return (
                    f"TLS handshake with {where} failed: the connection was closed, it does "
                    f"not seem to speak TLS (a plain ws:// server?); use ws://{where}"
                )
        return None
    # ws:// to a TLS server: our plain HTTP request is not a TLS ClientHello, the
    # server drops the connection (or answers with a TLS alert) before any HTTP answer.
    names = {type(e).__name__ for e in chain}
    if names & {"InvalidMessage", "EOFError"}:
        return (
            f"{where} closed the connection without a websocket answer: if it serves TLS, "
            f"use wss://{where}"
        )
    return None


@contextlib.contextmanager
def reload_on_sighup(reload: Callable[[], object]) -> Iterator[None]:
    """While inside, SIGHUP calls ``reload()`` in the running loop (POSIX only)."""
    loop = asyncio.get_running_loop()
    hup = getattr(signal, "SIGHUP", None)
    if hup is None:  # pragma: no cover - Windows
        yield
        return
    loop.add_signal_handler(hup, reload)
    try:
        yield
    finally:
        loop.remove_signal_handler(hup)
