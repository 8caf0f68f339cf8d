"""Identity files: created 0600 from the start, refused when exposed, stable fingerprints."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from net.identity import (
    Identity,
    IdentityFileError,
    sender_id_for,
    verify_signature,
)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_new_identity_file_has_mode_0600(tmp_path: Path) -> None:
    path = tmp_path / "identity.pem"
    ident = Identity.load_or_create(path)
    assert _mode(path) == 0o600
    assert path.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    assert ident.public_key == Identity.load(path).public_key
    # no temporary file is left behind
    assert sorted(p.name for p in tmp_path.iterdir()) == ["identity.pem"]


def test_mode_0600_even_with_a_permissive_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        path = tmp_path / "sub" / "identity.pem"
        Identity.load_or_create(path)
    finally:
        os.umask(old)
    assert _mode(path) == 0o600
    assert _mode(path.parent) == 0o700


def test_reload_gives_the_same_identity(tmp_path: Path) -> None:
    path = tmp_path / "identity.pem"
    first = Identity.load_or_create(path)
    second = Identity.load_or_create(path)
    assert second.public_key == first.public_key
    assert second.sender_id == first.sender_id
    assert second.private_bytes() == first.private_bytes()


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660, 0o666, 0o700])
def test_refuses_a_file_readable_by_others(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "identity.pem"
    Identity.load_or_create(path)
    path.chmod(mode)
    if mode & 0o077 == 0:  # 0700 has no group/other bits: accepted
        Identity.load_or_create(path)
        return
    with pytest.raises(IdentityFileError, match=r"chmod 600"):
        Identity.load_or_create(path)
    # and it was not replaced by a new key
    path.chmod(0o600)
    Identity.load(path)


def test_refuses_garbage_and_non_ed25519_keys(tmp_path: Path) -> None:
    path = tmp_path / "identity.pem"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, b"not a key")
    os.close(fd)
    with pytest.raises(IdentityFileError, match="unreadable"):
        Identity.load_or_create(path)
    assert path.read_bytes() == b"not a key"  # never overwritten


def test_refuses_a_directory_or_symlink(tmp_path: Path) -> None:
    (tmp_path / "dir.pem").mkdir(mode=0o700)
    with pytest.raises(IdentityFileError):
        Identity.load_or_create(tmp_path / "dir.pem")
    real = tmp_path / "real.pem"
    Identity.load_or_create(real)
    link = tmp_path / "link.pem"
    link.symlink_to(real)
    with pytest.raises(IdentityFileError):
        Identity.load(link)


def test_sender_id_format_and_stability() -> None:
    # pinned vector: sha256(bytes(range(32)))[:16] as lowercase hex
    assert sender_id_for(bytes(range(32))) == "630dcd2966c4336691125448bbb25b4f"
    ident = Identity.generate()
    assert re.fullmatch(r"[0-9a-f]{32}", ident.sender_id)
    assert ident.sender_id == sender_id_for(ident.public_key)
    again = Identity.from_private_bytes(ident.private_bytes())
    assert again.sender_id == ident.sender_id
    assert Identity.from_pem(ident.to_pem()).sender_id == ident.sender_id
    assert Identity.generate().sender_id != ident.sender_id


def test_sender_id_for_rejects_wrong_length() -> None:
    for bad in (b"", bytes(31), bytes(33)):
        with pytest.raises(ValueError):
            sender_id_for(bad)


def test_sign_and_verify() -> None:
    ident = Identity.generate()
    sig = ident.sign(b"message")
    assert len(sig) == 64
    assert verify_signature(ident.public_key, sig, b"message")
    assert not verify_signature(ident.public_key, sig, b"messagE")
    assert not verify_signature(Identity.generate().public_key, sig, b"message")
    assert not verify_signature(ident.public_key, sig[:-1], b"message")
    assert not verify_signature(b"short", sig, b"message")


def test_private_key_is_not_in_repr() -> None:
    ident = Identity.generate()
    assert ident.private_bytes().hex() not in repr(ident)
    assert "private_key" not in repr(ident)


def test_signatures_are_plain_ed25519_in_both_libraries() -> None:
    """libsodium (used to sign and verify) and OpenSSL agree byte for byte.

    Ed25519 is deterministic, so the identity's signature equals the one
    ``cryptography`` makes with the same key, verifies there, and a signature
    made there verifies here; a tampered message or a small-order public key
    does not.
    """
    ident = Identity.generate()
    msg = b"sdschat-v2" + os.urandom(48)
    sig = ident.sign(msg)
    assert sig == ident.private_key.sign(msg)
    ident.private_key.public_key().verify(sig, msg)  # raises if OpenSSL disagrees
    other = ident.private_key.sign(msg + b"!")
    assert verify_signature(ident.public_key, other, msg + b"!")
    assert not verify_signature(ident.public_key, other, msg)
    identity_point = bytes([1]) + bytes(31)  # small order: never a real key
    assert not verify_signature(identity_point, bytes([1]) + bytes(63), b"")
