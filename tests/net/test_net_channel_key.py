"""Channel keys: deterministic, passphrase-bound, topics that reveal nothing."""

from __future__ import annotations

import hashlib

import pytest

from net.channel_key import (
    DEFAULT_KDF,
    KEY_BYTES,
    TEST_KDF,
    TOPIC_BYTES,
    KdfParams,
    derive_channel_key,
    topic_for_key,
)


def test_deterministic_and_sized() -> None:
    a = derive_channel_key("general", "hunter2", params=TEST_KDF)
    b = derive_channel_key("general", "hunter2", params=TEST_KDF)
    assert a == b
    assert len(a.key) == KEY_BYTES
    assert len(a.topic) == TOPIC_BYTES
    assert not a.is_public
    assert a.topic == topic_for_key(a.key)
    assert a.topic == hashlib.sha256(b"sdschat-topic-v1" + a.key).digest()[:16]


def test_passphrase_and_name_both_matter() -> None:
    base = derive_channel_key("general", "hunter2", params=TEST_KDF)
    assert derive_channel_key("general", "hunter3", params=TEST_KDF).key != base.key
    assert derive_channel_key("General", "hunter2", params=TEST_KDF).key != base.key
    assert derive_channel_key("general", b"hunter2", params=TEST_KDF).key == base.key
    other_params = KdfParams(memory_kib=128, iterations=1, lanes=1)
    assert derive_channel_key("general", "hunter2", params=other_params).key != base.key


def test_public_channel() -> None:
    pub = derive_channel_key("lobby", None, params=TEST_KDF)
    assert pub.is_public
    assert derive_channel_key("lobby", "", params=TEST_KDF) == pub
    assert derive_channel_key("lobby", b"", params=TEST_KDF) == pub
    # a passphrase, even one that looks like the public marker, gives another key
    for pw in ("\x00", "lobby", " "):
        private = derive_channel_key("lobby", pw, params=TEST_KDF)
        assert not private.is_public
        assert private.key != pub.key


def test_topic_does_not_reveal_the_name() -> None:
    name = "lobby"
    pub = derive_channel_key(name, None, params=TEST_KDF)
    assert name.encode() not in pub.topic
    for naive in (
        hashlib.sha256(name.encode()).digest(),
        hashlib.sha256(b"sdschat-topic-v1" + name.encode()).digest(),
        hashlib.sha256(b"sdschat-channel-salt-v1\x00" + name.encode()).digest(),
    ):
        assert naive[:16] != pub.topic
    # a public and a private channel of the same name do not share a topic
    assert derive_channel_key(name, "pw", params=TEST_KDF).topic != pub.topic


def test_unicode_is_nfc_normalised() -> None:
    composed = "caf\u00e9"
    decomposed = "cafe\u0301"
    a = derive_channel_key(composed, composed, params=TEST_KDF)
    b = derive_channel_key(decomposed, decomposed, params=TEST_KDF)
    assert a.key == b.key


def test_key_hidden_from_repr() -> None:
    ck = derive_channel_key("general", "pw", params=TEST_KDF)
    assert ck.key.hex() not in repr(ck)


def test_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        derive_channel_key("", "pw", params=TEST_KDF)
    with pytest.raises(ValueError):
        KdfParams(memory_kib=4, iterations=1, lanes=1)
    with pytest.raises(ValueError):
        topic_for_key(b"short")


def test_default_parameters_are_memory_hard() -> None:
    # 64 MiB, at least 2 passes: far beyond cheap GPU guessing of short names
    assert DEFAULT_KDF.memory_kib >= 64 * 1024
    assert DEFAULT_KDF.iterations >= 2
    ck = derive_channel_key("general", "pw")  # one real derivation (~0.1 s)
    assert ck != derive_channel_key("general", "pw", params=TEST_KDF)
    assert len(ck.key) == KEY_BYTES
