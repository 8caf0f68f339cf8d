"""Linking a device end to end, with real processes over a real relay (issue 40 §2):
bob's running node shows a code (``/link``), a new process redeems it
(``sdschat join --link CODE``) into a new data directory, and that device reads the
history of bob's passphrase channel from the store peer, as bob could. A wrong code
links nothing and writes nothing on either device."""

from __future__ import annotations

import json
from pathlib import Path

from e2e_helpers import Cluster, cluster, history
from test_e2e_members import _invite, _join_by_invite, _joined, _sees

from net.channel_key import derive_channel_key
from tests.procs import Proc, sdschat

PASS = "correct horse battery"


def _contents(p: object) -> set[str]:
    return {e.get("text") or "" for e in p.select("delivered")}  # type: ignore[attr-defined]


def _offered(p: object) -> str:
    p.wait_for(lambda: bool(p.select("link", state="offered")), 30, "a link code")  # type: ignore[attr-defined]
    return str(p.select("link", state="offered")[-1]["code"])  # type: ignore[attr-defined]


def link_laptop(c: Cluster, bob: Proc, url: str, laptop_dir: Path) -> Proc:
    """``/link`` on bob's running node, ``sdschat join --link CODE`` into ``laptop_dir``
    (device name ``laptop``); returns the laptop's process once both said linked."""
    bob.send("/link")
    code = _offered(bob)
    laptop = c.start(sdschat("join", "--link", code, "--data-dir", str(laptop_dir),
                             "--relay", url, "--device-name", "laptop", "--headless",
                             "--fast"), "laptop")  # fmt: skip
    laptop.wait_for(lambda: bool(laptop.select("link", state="linked")), 60, "linked")
    bob.wait_for(lambda: bool(bob.select("link", state="linked")), 30, "bob: linked")
    return laptop


def link_beside(c: Cluster, data_dir: Path, url: str) -> tuple[Proc, str]:
    """``sdschat link`` beside the node of ``data_dir``: its process and the code it shows."""
    linker = c.start(sdschat("link", "--data-dir", str(data_dir), "--relay", url,
                             "--device-name", "desktop"), "linker", stdin=False)  # fmt: skip
    linker.wait_for(lambda: len(linker.raw) >= 3, 30, "the code and its QR code")
    return linker, linker.raw[0].strip()


def test_a_linked_device_reads_the_history_bob_could_read(tmp_path: Path) -> None:
    pf = tmp_path / "pass"
    pf.write_text(PASS + "\n")
    key = derive_channel_key("room", PASS.encode())
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        _store, store_url = c.store(url, tmp_path / "store", topics=(key.topic,))
        extra = ["--passphrase-file", str(pf), "--store", store_url]
        alice = c.node("alice", url, extra=extra)
        bob = c.node("bob", url, extra=extra)
        for p in (alice, bob):
            p.wait_for(lambda p=p: bool(p.select("connection", state="connected")), 30,
                       "connected")  # fmt: skip
        alice.send("one", "two", "three")
        bob.send("four")
        bob.wait_for(lambda: {"one", "two", "three"} <= _contents(bob), 60, "alice's lines")
        alice.wait_for(lambda: "four" in _contents(alice), 60, "bob's line")

        laptop_dir = tmp_path / "laptop"
        laptop = link_laptop(c, bob, url, laptop_dir)
        sas_new = laptop.select("link", state="sas")[0]["sas"]
        sas_old = bob.select("link", state="sas")[0]["sas"]
        assert sas_new == sas_old  # both screens showed the same six digits
        done = bob.select("link", state="linked")[0]
        assert done["device_name"] == "laptop" and len(done["recovery_words"].split()) == 24
        # the new device: the channel handed over, the history read from the store peer
        laptop.wait_for(lambda: {"one", "two", "three", "four"} <= _contents(laptop), 90,
                        "the history of #room")  # fmt: skip
        joined = laptop.select("channel")[0]
        assert joined["channel"] == "room" and not joined["public"]
        # the passphrase never travelled: the handed-over channels.json holds the derived key
        assert PASS not in (laptop_dir / "channels.json").read_text()
        # both devices hold the person's device log, with both devices in it
        old_log = json.loads((tmp_path / "bob" / "members" / "devices.json").read_text())
        new_log = json.loads((laptop_dir / "members" / "devices.json").read_text())
        assert old_log == new_log and len(old_log["entries"]) == 2
        # the laptop speaks in the channel with its own key: alice reads it
        laptop.send("from the laptop")
        alice.wait_for(lambda: "from the laptop" in _contents(alice), 60, "the laptop's line")
        lines = {h["content"]: h for h in history(laptop_dir)}
        assert {"one", "two", "three", "four", "from the laptop"} <= set(lines)
        assert lines["four"]["sender"] != lines["from the laptop"]["sender"]


def test_a_wrong_code_links_nothing_and_spends_the_code(tmp_path: Path) -> None:
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        bob = c.node("bob", url, channel="town")
        bob.wait_for(lambda: bool(bob.select("connection", state="connected")), 30,
                     "connected")  # fmt: skip
        bob.send("/link")
        code = _offered(bob)
        digits, first, second = code.split("-")
        wrong = f"{digits}-{second}-{first}" if first != second else f"{digits}-zoo-zoo"
        laptop_dir = tmp_path / "laptop"
        guess = c.start(sdschat("join", "--link", wrong, "--data-dir", str(laptop_dir),
                                "--relay", url, "--headless"), "guess")  # fmt: skip
        assert guess.wait(60) == 8
        failed = guess.select("link", state="failed")[0]
        assert failed["reason"] == "wrong_code" and "wrong" in failed["text"]
        assert not laptop_dir.exists()  # nothing written on the new device
        bob.wait_for(lambda: bool(bob.select("link", state="failed")), 30, "bob: failed")
        assert bob.select("link", state="failed")[0]["reason"] == "wrong_code"
        assert not (tmp_path / "bob" / "members" / "devices.json").exists()
        # a code that is no code: exit 2 at once, nothing written
        bad = c.start(sdschat("join", "--link", "4821-tiger", "--data-dir", str(laptop_dir),
                              "--relay", url, "--headless"), "bad")  # fmt: skip
        assert bad.wait(30) == 2 and not laptop_dir.exists()
        assert bad.select("link", state="failed")[0]["reason"] == "usage"


def test_sdschat_link_beside_a_running_node_hands_over_a_members_channel(
        tmp_path: Path) -> None:  # fmt: skip
    """``sdschat link`` (a process of its own beside bob's running node): the code on its
    first line, a QR code; the laptop gets the members channel and its group sessions,
    and opens what alice sends in it after the link."""
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        alice = c.node("alice", url, channel="team", extra=["--create"])
        _joined(alice, "created")
        topic = alice.select("channel")[0]["topic"]
        _store, store_url = c.store(url, tmp_path / "store", topics=(bytes.fromhex(topic),))
        bob = _join_by_invite(c, "bob", _invite(alice), url, ["--store", store_url])
        alice.send("members only one", "members only two")
        _sees(bob, "members only one", "members only two")
        linker, code = link_beside(c, tmp_path / "bob", url)
        assert any("▀" in line or "▄" in line for line in linker.raw[1:])
        laptop_dir = tmp_path / "laptop"
        laptop = c.start(sdschat("join", "--link", code, "--data-dir", str(laptop_dir),
                                 "--relay", url, "--headless", "--fast"), "laptop")  # fmt: skip
        laptop.wait_for(lambda: bool(laptop.select("link", state="linked")), 60, "linked")
        assert linker.wait(30) == 0
        out = "\n".join(linker.raw)
        assert "as a device of yours" in out and "recovery words" in out
        assert laptop.select("link", state="linked")[0]["channels"] == ["team"]
        # the channel and alice's session came over: the laptop opens what alice sends
        # next in it (the lines bob read before are not opened again: each read cuts
        # bob's copy of the session past them, forward secrecy; docs/members.md)
        laptop.wait_for(lambda: bool(laptop.select("channel", channel="team")), 30, "#team")
        alice.send("after the link")
        _sees(laptop, "after the link")
        line = next(e for e in laptop.select("delivered") if e.get("text") == "after the link")
        assert line["name"] == "alice"


def _added(p: Proc, member_id: str) -> bool:
    return any(member_id in (e.get("data") or {}).get("added", ())
               for e in p.select("members", what="changed"))  # fmt: skip


def test_a_linked_device_speaks_as_bob_in_a_members_channel_until_unlinked(
        tmp_path: Path) -> None:  # fmt: skip
    """bob links a laptop; his node adds it to #team (``add_device``): alice shows the
    laptop's line as bob's and the laptop reads alice's next line. bob unlinks it: a new
    epoch for the others, and the laptop opens nothing alice sends afterwards."""
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        alice = c.node("alice", url, channel="team", extra=["--create"])
        _joined(alice, "created")
        bob = _join_by_invite(c, "bob", _invite(alice), url)
        alice.send("hello bob")
        _sees(bob, "hello bob")
        laptop = link_laptop(c, bob, url, tmp_path / "laptop")
        device = laptop.select("link", state="linked")[0]["device"]
        alice.wait_for(lambda: _added(alice, device), 60, "the laptop added to #team")
        laptop.wait_for(lambda: _added(laptop, device), 60, "the laptop a member here")
        laptop.send("from the laptop")
        _sees(alice, "from the laptop")
        line = next(e for e in alice.select("delivered") if e.get("text") == "from the laptop")
        assert line["name"] == "bob" and line["sender"] == device
        _sees(bob, "from the laptop")  # a sibling's line, not bob's own echo
        alice.send("for bob's devices")
        _sees(laptop, "for bob's devices")
        # bob unlinks the laptop: removed from #team with new keys for alice and bob
        bob.send("/unlink laptop")
        alice.wait_for(lambda: any(device in (e.get("data") or {}).get("removed", ())
                                   for e in alice.select("members", what="changed")),
                       60, "the laptop removed from #team")  # fmt: skip
        alice.send("after the unlink")
        _sees(bob, "after the unlink")
        assert "after the unlink" not in _contents(laptop)
