"""What a link hands over (app/members/link_handover.py): only the files of its list,
the passphrase never, the old device's outbound session never; written whole or not
at all."""

from __future__ import annotations

import json
import zlib
from base64 import b64encode
from pathlib import Path

import pytest

from app.members.link_handover import MAX_PAYLOAD, HandoverError, gather, install, parse


def _members_state(own: str) -> bytes:
    keys = {"version": 1, "own_id": own, "out": {"pickle": "secret-ratchet"}, "in": [],
            "rotate_next": False}  # fmt: skip
    doc = {"version": 2, "own_id": own, "group_keys": json.dumps(keys), "sent": {"a": 1}}
    return json.dumps(doc).encode()


def _old_device(tmp_path: Path) -> Path:
    d = tmp_path / "old"
    (d / "members").mkdir(parents=True)
    (d / "channels.json").write_text('{"v": 1, "channels": [{"name": "team", "members": true}]}')
    (d / "setup.json").write_text('{"v": 1, "stores": ["ws://127.0.0.1:1"]}')
    (d / "identity.pem").write_text("NOT TO BE HANDED OVER")
    (d / "members" / "invites.json").write_text("{}")
    (d / "members" / ("ab" * 16 + ".json")).write_bytes(_members_state("old-id"))
    (d / "members" / ("ab" * 16 + ".log")).write_text('["m", "a", 1, null, null]\n')
    return d


def test_gather_and_install_hand_over_the_list_and_nothing_else(tmp_path: Path) -> None:
    handover = parse(gather(_old_device(tmp_path)))
    assert set(handover.files) == {"channels.json", "setup.json", f"members/{'ab' * 16}.json",
                                   f"members/{'ab' * 16}.log"}  # fmt: skip
    assert handover.channels == ["team"]
    sent = json.loads(handover.files[f"members/{'ab' * 16}.json"])
    assert json.loads(sent["group_keys"])["out"] is None  # the outbound ratchet stays home
    new = tmp_path / "new"
    install(handover, new, "new-id", {"identity.pem": b"new key"})
    state = json.loads((new / "members" / f"{'ab' * 16}.json").read_text())
    assert state["own_id"] == "new-id" and json.loads(state["group_keys"])["own_id"] == "new-id"
    assert (new / "identity.pem").read_bytes() == b"new key"
    assert (new / "setup.json").stat().st_mode & 0o077 == 0
    assert not list(tmp_path.glob(".new.linking.*"))


def test_a_payload_naming_another_path_is_refused_whole(tmp_path: Path) -> None:
    for rel in ("../escape.json", "identity.pem", "members/invites.json", "/etc/x"):
        doc = {"v": 1, "name": "bob", "files": {rel: b64encode(b"x").decode(),
                                                "channels.json": b64encode(b"{}").decode()}}
        with pytest.raises(HandoverError, match="may not"):
            parse(zlib.compress(json.dumps(doc).encode()))
    with pytest.raises(HandoverError, match="not one sdschat made"):
        parse(b"garbage")


def test_install_into_a_used_directory_writes_nothing(tmp_path: Path) -> None:
    handover = parse(gather(_old_device(tmp_path)))
    used = tmp_path / "used"
    used.mkdir()
    (used / "identity.pem").write_text("someone")
    with pytest.raises(HandoverError, match="not empty"):
        install(handover, used, "new-id", {})
    assert [p.name for p in used.iterdir()] == ["identity.pem"]


def test_too_much_to_hand_over_is_refused_with_what_to_do(tmp_path: Path) -> None:
    d = _old_device(tmp_path)
    import os

    (d / "members" / ("cd" * 16 + ".log")).write_bytes(os.urandom(MAX_PAYLOAD + 1024))
    (d / "members" / ("cd" * 16 + ".json")).write_bytes(_members_state("old-id"))
    with pytest.raises(HandoverError, match="too much to hand over"):
        gather(d)
