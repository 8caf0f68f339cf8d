"""The root of every error :mod:`sds` raises: ``except sds.SdsError`` catches them all.

The core never raises on malformed input it receives (that becomes an event with a
reason); it raises on a call that breaks its contract (:class:`DecodeError` for bytes that
are not an SDS message, passed to :func:`sds.decode`)."""

from __future__ import annotations

__all__ = ["SdsError"]


class SdsError(Exception):
    """The SDS core was asked something it cannot do."""
