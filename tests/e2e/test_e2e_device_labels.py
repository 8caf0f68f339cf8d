"""The device log travels in a public channel, and the channel sees one person
(issue 40 §1), with real processes over a real relay: bob links a laptop; alice shows
the lines of bob's desktop and laptop as one person with bob's root fingerprint; bob's
desktop shows the laptop's lines as bob's own (not dropped); mallory, who sends bob's
log with her own key added by herself, is not shown as bob."""

from __future__ import annotations

import json
from base64 import b64decode, b64encode
from pathlib import Path
from typing import Any

from e2e_helpers import Cluster, cluster, history
from test_e2e_link_device import link_beside, link_laptop

from app.members.devices import decode_entry, make_add
from net.identity import Identity
from tests.procs import Proc, sdschat


def _line(p: Proc, text: str) -> dict[str, Any] | None:
    return next((e for e in p.select("delivered") if e.get("text") == text), None)


def _line_of(p: Proc, text: str, person: str) -> dict[str, Any]:
    """Wait until ``p`` delivered ``text`` labelled as ``person`` (or fail with it)."""
    p.wait_for(lambda: (_line(p, text) or {}).get("person") == person, 60,
               f"{text!r} as {person[:8]}")  # fmt: skip
    line = _line(p, text)
    assert line is not None
    return line


def _forged_log(bob_dir: Path, mallory: Identity) -> bytes:
    """bob's device log with mallory's key added, signed by mallory (no device of bob's),
    as a ``members/devices.json`` mallory's node sends as its own."""
    doc = json.loads((bob_dir / "members" / "devices.json").read_text())
    raws = [b64decode(e) for e in doc["entries"]]
    hashes = []
    for raw in raws:
        e = decode_entry(raw)
        assert not isinstance(e, str)
        hashes.append(e.hash)
    root = bytes.fromhex(doc["root"])
    forged = make_add(root, mallory, hashes, mallory, "phone")
    doc["entries"] = [b64encode(r).decode() for r in [*raws, forged]]
    return json.dumps(doc).encode()


def _alice_and_bob(c: Cluster, url: str) -> tuple[Proc, Proc, str]:
    """alice's and bob's headless nodes on ``url``, both connected, and bob's root id
    (his first device's key is his root)."""
    alice = c.node("alice", url)
    bob = c.node("bob", url)
    for p in (alice, bob):
        p.wait_for(lambda p=p: bool(p.select("connection", state="connected")), 30,
                   "connected")  # fmt: skip
    bob.wait_for(lambda: bool(bob.select("ready")), 30, "bob ready")
    return alice, bob, str(bob.select("ready")[0]["sender"])


def test_bobs_devices_are_one_person_to_alice_and_to_bob_and_mallory_is_not_bob(
        tmp_path: Path) -> None:  # fmt: skip
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        alice, bob, root = _alice_and_bob(c, url)
        laptop = link_laptop(c, bob, url, tmp_path / "laptop")
        laptop.wait_for(lambda: bool(laptop.select("channel", channel="room")), 30, "#room")
        bob.send("from the desktop")
        laptop.send("from the laptop")
        desk = _line_of(alice, "from the desktop", root)
        lap = _line_of(alice, "from the laptop", root)
        assert desk["sender"] == root and lap["sender"] != root
        assert desk["name"] == lap["name"] == "bob" and desk["label"] == lap["label"]
        assert lap["device"] == "laptop" and not lap["own_device"]
        # bob's desktop shows the laptop's line as his own person's, marked with the device
        mine = _line_of(bob, "from the laptop", root)
        assert mine["label"] == "bob · laptop" and mine["name"] == "bob" and mine["own_device"]
        # and the laptop shows the desktop's the same way
        theirs = _line_of(laptop, "from the desktop", root)
        assert theirs["label"].startswith("bob · ") and theirs["own_device"]

        # mallory: bob's log with her own key added by herself, under the name bob
        mallory_dir = tmp_path / "mallory"
        (mallory_dir / "members").mkdir(parents=True)
        key = Identity.generate()
        (mallory_dir / "identity.pem").write_bytes(key.to_pem())
        (mallory_dir / "identity.pem").chmod(0o600)
        (mallory_dir / "members" / "devices.json").write_bytes(_forged_log(tmp_path / "bob", key))
        mallory = c.node("bob", url, data_dir=mallory_dir, label="mallory")
        mallory.wait_for(lambda: bool(mallory.select("connection", state="connected")), 30,
                         "connected")  # fmt: skip
        mallory.send("i am bob")
        alice.wait_for(lambda: _line(alice, "i am bob") is not None, 60, "mallory's line")
        evil = _line(alice, "i am bob")
        assert evil is not None and evil["sender"] == key.sender_id
        assert evil["person"] != root and evil["label"] != desk["label"]
        # a line of bob's after mallory's: still bob, the root's fingerprint beside it
        bob.send("still me")
        again = _line_of(alice, "still me", root)
        assert again["label"] == f"bob ({root[:8]})"
        assert evil["label"] == "bob" or evil["label"] == f"bob ({key.sender_id[:8]})"

        # /who lists bob once, with his two devices; mallory apart
        alice.send("/who")
        alice.wait_for(lambda: bool(alice.select("peers")), 30, "/who")
        peers = alice.select("peers")[-1]["peers"]
        bobs = [p for p in peers if p["person"] == root]
        assert len(bobs) == 1 and bobs[0]["sender"] == root and bobs[0]["name"] == "bob"
        assert len(bobs[0]["devices"]) == 2 and "laptop" in bobs[0]["devices"]
        assert any(p["sender"] == key.sender_id and p["person"] != root for p in peers)
        # sdschat history labels the same: one person, mallory apart
        lines = {h["content"]: h for h in history(tmp_path / "alice")}
        assert lines["from the desktop"]["person"] == lines["from the laptop"]["person"] == root
        assert lines["i am bob"]["person"] != root
        assert lines["from the laptop"]["label"] == lines["from the desktop"]["label"]
        assert lines["i am bob"]["label"] != lines["from the desktop"]["label"]
        assert "device list" not in lines  # the device logs are no lines

        # a restart keeps what alice folded (members/people.json): bob does not send his
        # log again, and his next line is still bob's
        assert oct((tmp_path / "alice" / "members" / "people.json").stat().st_mode & 0o777) == (
            "0o600"
        )
        alice.close_stdin()
        assert alice.wait(30) == 0
        alice = c.node("alice", url, label="alice-again")
        alice.wait_for(lambda: bool(alice.select("connection", state="connected")), 30,
                       "connected")  # fmt: skip
        alice.send("back")
        _line_of(bob, "back", "")  # bob heard her again
        laptop.send("after the restart")
        _line_of(alice, "after the restart", root)

        # a newcomer who missed the log: bob's devices send it again once they hear her
        def logs_sent() -> int:
            return len([e for e in laptop.select("own", state="logged") if e["kind"] == "keys"])

        before = logs_sent()
        carol = c.node("carol", url)
        carol.wait_for(lambda: bool(carol.select("connection", state="connected")), 30,
                       "connected")  # fmt: skip
        carol.send("hello all")
        _line_of(bob, "hello all", "")
        _line_of(laptop, "hello all", "")
        laptop.wait_for(lambda: logs_sent() > before, 30, "the laptop's log sent again")
        laptop.send("welcome carol")
        _line_of(carol, "welcome carol", root)


def test_sdschat_link_beside_a_running_node_sends_the_new_log(tmp_path: Path) -> None:
    """The log ``sdschat link`` writes beside bob's running node goes out from it: alice
    shows bob's desktop and laptop as one person without bob restarting."""
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        alice, bob, root = _alice_and_bob(c, url)
        linker, code = link_beside(c, tmp_path / "bob", url)
        laptop = c.start(sdschat("join", "--link", code, "--data-dir", str(tmp_path / "laptop"),
                                 "--relay", url, "--device-name", "laptop", "--headless",
                                 "--fast"), "laptop")  # fmt: skip
        laptop.wait_for(lambda: bool(laptop.select("link", state="linked")), 60, "linked")
        assert linker.wait(30) == 0
        # bob's node sends the new log by itself (it looks at devices.json)
        bob.wait_for(lambda: any(e["kind"] == "keys" for e in bob.select("own", state="logged")),
                     30, "bob's log sent")  # fmt: skip
        bob.send("from the desktop")
        laptop.send("from the laptop")
        desk = _line_of(alice, "from the desktop", root)
        lap = _line_of(alice, "from the laptop", root)
        assert desk["label"] == lap["label"] == "bob"


def test_unlink_revokes_the_laptop_and_its_later_lines_are_not_bobs(tmp_path: Path) -> None:
    """``/unlink laptop`` on bob's desktop: the revocation travels in the device log, and
    alice and bob's desktop stop showing the laptop's lines as bob's; a name that picks
    no device is refused and changes nothing."""
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        alice, bob, root = _alice_and_bob(c, url)
        laptop = link_laptop(c, bob, url, tmp_path / "laptop")
        laptop.wait_for(lambda: bool(laptop.select("channel", channel="room")), 30, "#room")
        laptop.send("before the unlink")
        _line_of(alice, "before the unlink", root)
        log_file = tmp_path / "bob" / "members" / "devices.json"

        before = log_file.read_bytes()
        bob.send("/unlink tablet")
        bob.wait_for(lambda: any("no device of yours is called 'tablet'" in e["message"]
                                 for e in bob.select("error")), 30, "refused")  # fmt: skip
        assert log_file.read_bytes() == before

        bob.send("/unlink laptop")
        laptop_id = str(laptop.select("ready")[0]["sender"])
        bob.wait_for(lambda: any(e.get("data", {}).get("unlinked") == laptop_id
                                 for e in bob.select("info")), 30, "unlinked")  # fmt: skip
        # bob's log keeps the revocation, signed by the desktop: one entry more
        log = json.loads(log_file.read_text())
        assert log["root"] == json.loads(before)["root"]
        assert len(log["entries"]) == len(json.loads(before)["entries"]) + 1
        # the revocation reaches alice with bob's next log; the laptop's later lines are
        # then its own, not bob's, at alice and at bob's desktop
        bob.send("after the unlink, from the desktop")
        _line_of(alice, "after the unlink, from the desktop", root)
        # the laptop is told, once, by the log that revokes it
        laptop.wait_for(lambda: any(e.get("data", {}).get("unlinked") == laptop_id
                                    for e in laptop.select("info")), 60, "told")  # fmt: skip
        told = [e for e in laptop.select("info") if e.get("data", {}).get("unlinked")]
        assert len(told) == 1 and told[0]["data"]["by"] == root  # the desktop, bob's root
        assert told[0]["text"].startswith("this device was unlinked by ")

        def not_bob(p: Proc, text: str) -> bool:
            line = _line(p, text)
            return line is not None and line.get("person") != root

        text = "after the unlink, from the laptop"
        laptop.send(text)
        alice.wait_for(lambda: not_bob(alice, text), 60, "the laptop's line not bob's")
        bob.wait_for(lambda: not_bob(bob, text), 60, "not bob's at the desktop")
        theirs = _line(alice, text)
        assert theirs is not None and theirs["sender"] == laptop_id
        assert theirs.get("device", "") == "" and theirs["label"] != f"bob ({root[:8]})"
        mine = _line(bob, text)
        assert mine is not None and "·" not in mine["label"]
