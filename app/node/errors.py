"""The node's own errors (all under :class:`app.AppError`).

``app.node.runtime`` re-exports them (``from app.node import NodeClosedError``).
"""

from __future__ import annotations

from app import AppError

__all__ = ["IdentityMismatchError", "NodeClosedError", "PassphraseMismatchError"]


class NodeClosedError(AppError, RuntimeError):
    """The node is closing or closed."""


class PassphraseMismatchError(AppError, ValueError):
    """The channel was joined in this data directory with another passphrase (other topic)."""


class IdentityMismatchError(AppError, RuntimeError):
    """The identity key file does not match the identity this database belongs to."""
