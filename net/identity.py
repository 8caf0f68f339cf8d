"""A participant's long-term identity: an Ed25519 key pair and its fingerprint.

The identity signs every envelope a participant seals (see ``net/envelope.py``);
receivers check that the SDS ``sender_id`` inside an envelope is the
fingerprint of the key that signed it, so nobody can speak under another
participant's id.

``sender_id`` format (stable, part of the wire contract):
    the first 16 bytes of ``sha256(raw_public_key)`` written as 32 lowercase
    hexadecimal characters, where ``raw_public_key`` is the 32-byte Ed25519
    public key. Example: ``"3f2a…"`` (32 chars). It is printable, fixed length,
    and collision resistant to 2**64 work, which is ample for naming the
    members of a chat.

Signing and verifying use libsodium (PyNaCl): its Ed25519 verification takes
about half the CPU time of OpenSSL's on the machines we measured (57 us
against 117-160 us; ``bench/envelope_open.py``), and a node verifies one
signature per envelope it receives. Signatures are plain RFC 8032 Ed25519
(deterministic: both libraries produce the same bytes for the same key and
message). Key files are still written and read with ``cryptography``.

On disk the private key is a PKCS#8 PEM file (unencrypted; protect the data
directory). :func:`Identity.load_or_create` creates it with mode 0600 from the
first byte on (``os.open`` with ``O_CREAT | O_EXCL`` and ``0o600``) and refuses
to load a file that group or others may access.

Typical use::

    ident = Identity.load_or_create(data_dir / "identity.pem")
    ident.sender_id          # the SDS sender_id to give the core
    ident.sign(message)      # 64-byte Ed25519 signature
"""

from __future__ import annotations

import functools
import hashlib
import os
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path

import nacl.bindings
import nacl.exceptions
import nacl.signing
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from net.errors import NetError

__all__ = [
    "PUBLIC_KEY_BYTES",
    "SENDER_ID_HEX_CHARS",
    "SIGNATURE_BYTES",
    "Identity",
    "IdentityFileError",
    "sender_id_for",
    "verify_signature",
]

PUBLIC_KEY_BYTES = 32
"""Length of a raw Ed25519 public key."""

SIGNATURE_BYTES = 64
"""Length of an Ed25519 signature."""

SENDER_ID_HEX_CHARS = 32
"""Length of a ``sender_id``: 16 bytes of sha256, hex encoded."""

_MAX_KEY_FILE_BYTES = 16 * 1024


class IdentityFileError(NetError):
    """The identity file exists but cannot be used (permissions, format, type).

    The message says what is wrong and how to fix it; the node should show it
    to the person and stop rather than create a new identity silently.
    """


@functools.lru_cache(maxsize=4096)
def sender_id_for(public_key: bytes) -> str:
    """Return the ``sender_id`` of a raw 32-byte Ed25519 public key.

    ``sha256(public_key)[:16]`` as 32 lowercase hex characters. Remembered for
    the last 4,096 keys: every received envelope asks for its sender's id.

    Raises:
        ValueError: ``public_key`` is not 32 bytes.
    """
    if len(public_key) != PUBLIC_KEY_BYTES:
        raise ValueError(
            f"an Ed25519 public key is {PUBLIC_KEY_BYTES} bytes, got {len(public_key)}"
        )
    return hashlib.sha256(public_key).digest()[:16].hex()


def verify_signature(public_key: bytes, signature: bytes, message: bytes) -> bool:
    """Return True if ``signature`` is a valid Ed25519 signature of ``message``.

    Never raises: a malformed key or signature simply does not verify.
    libsodium also refuses public keys of small order and non-canonical
    signature scalars (RFC 8032's strict checks).
    """
    if len(public_key) != PUBLIC_KEY_BYTES or len(signature) != SIGNATURE_BYTES:
        return False
    try:
        nacl.bindings.crypto_sign_open(bytes(signature) + bytes(message), bytes(public_key))
    except (nacl.exceptions.BadSignatureError, nacl.exceptions.CryptoError, ValueError,
            TypeError):  # fmt: skip
        return False
    return True


@dataclass(frozen=True)
class Identity:
    """An Ed25519 key pair plus its derived, printable ``sender_id``.

    Build one with :meth:`generate`, :meth:`from_private_bytes` or
    :meth:`load_or_create`; do not call the constructor directly.
    """

    private_key: Ed25519PrivateKey = field(repr=False)
    public_key: bytes
    sender_id: str
    _signer: nacl.signing.SigningKey = field(repr=False, compare=False)

    @classmethod
    def _from_key(cls, key: Ed25519PrivateKey) -> Identity:
        public = key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        seed = key.private_bytes(
            serialization.Encoding.Raw,
            serialization.PrivateFormat.Raw,
            serialization.NoEncryption(),
        )
        signer = nacl.signing.SigningKey(seed)
        if bytes(signer.verify_key) != public:  # the same key in both libraries, or stop
            raise ValueError("libsodium derived another public key from this private key")
        return cls(
            private_key=key, public_key=public, sender_id=sender_id_for(public), _signer=signer
        )

    @classmethod
    def generate(cls) -> Identity:
        """Create a fresh random identity (kept in memory only)."""
        return cls._from_key(Ed25519PrivateKey.generate())

    @classmethod
    def from_private_bytes(cls, raw: bytes) -> Identity:
        """Rebuild an identity from its 32-byte raw private key (see :meth:`private_bytes`).

        Raises:
            ValueError: ``raw`` is not a 32-byte Ed25519 private key.
        """
        if len(raw) != 32:
            raise ValueError(f"an Ed25519 private key is 32 bytes, got {len(raw)}")
        return cls._from_key(Ed25519PrivateKey.from_private_bytes(raw))

    def private_bytes(self) -> bytes:
        """The raw 32-byte private key (secret: store it as carefully as the key file)."""
        return self.private_key.private_bytes(
            serialization.Encoding.Raw,
            serialization.PrivateFormat.Raw,
            serialization.NoEncryption(),
        )

    def sign(self, message: bytes) -> bytes:
        """Sign ``message``; returns a 64-byte Ed25519 signature."""
        return bytes(self._signer.sign(message).signature)

    def to_pem(self) -> bytes:
        """The private key as an unencrypted PKCS#8 PEM document."""
        return self.private_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    @classmethod
    def from_pem(cls, pem: bytes) -> Identity:
        """Parse an unencrypted PKCS#8 PEM Ed25519 private key.

        Raises:
            ValueError: not a PEM Ed25519 private key.
        """
        try:
            key = serialization.load_pem_private_key(pem, password=None)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"not an unencrypted PEM private key: {exc}") from exc
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError(f"expected an Ed25519 private key, got {type(key).__name__}")
        return cls._from_key(key)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Identity:
        """Load an existing identity file, checking its permissions first.

        Raises:
            FileNotFoundError: there is no file at ``path``.
            IdentityFileError: the file is not a regular file, is accessible
                by group or others, or does not hold an Ed25519 key.
        """
        p = Path(path)
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(p, flags)
        except OSError as exc:
            if isinstance(exc, FileNotFoundError):
                raise
            raise IdentityFileError(f"cannot open identity file {p}: {exc}") from exc
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise IdentityFileError(f"identity file {p} is not a regular file")
            mode = stat.S_IMODE(st.st_mode)
            if mode & 0o077:
                raise IdentityFileError(
                    f"identity file {p} has mode {mode:04o}: group/others may access "
                    f"the private key. Restrict it with `chmod 600 {p}` and retry."
                )
            if st.st_size > _MAX_KEY_FILE_BYTES:
                raise IdentityFileError(f"identity file {p} is too large to be a key")
            chunks: list[bytes] = []
            remaining = _MAX_KEY_FILE_BYTES + 1
            while remaining > 0:  # bounded by the size cap
                chunk = os.read(fd, remaining)
                if not chunk:
                    break
                chunks.append(chunk)
                remaining -= len(chunk)
            data = b"".join(chunks)
        finally:
            os.close(fd)
        try:
            return cls.from_pem(data)
        except ValueError as exc:
            raise IdentityFileError(f"identity file {p} is unreadable: {exc}") from exc

    @classmethod
    def load_or_create(cls, path: str | os.PathLike[str]) -> Identity:
        """Load the identity at ``path``, creating a new one there if absent.

        A new key is written to a temporary file created with
        ``O_CREAT | O_EXCL`` and mode 0600, synced, then hard-linked into place
        (atomic, never overwrites), so a concurrent creator or a crash never
        leaves a half-written key at ``path``. Missing parent directories are
        created with mode 0700.

        Raises:
            IdentityFileError: an existing file is unusable (see :meth:`load`).
        """
        p = Path(path)
        try:
            return cls.load(p)
        except FileNotFoundError:
            pass
        p.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        ident = cls.generate()
        tmp = p.with_name(f".{p.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(tmp, flags, 0o600)
        try:
            try:
                view = memoryview(ident.to_pem())
                while view:  # bounded: each write makes progress
                    written = os.write(fd, view)
                    view = view[written:]
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(tmp, p)
            except FileExistsError:
                return cls.load(p)  # someone else won the race: use theirs
        finally:
            tmp.unlink(missing_ok=True)
        return ident
