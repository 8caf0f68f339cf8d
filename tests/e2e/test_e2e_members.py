"""Members channels with real processes: create, invite, chat, remove, and a relay tap.

The removed member keeps its whole data directory and a tap at the relay records
every envelope of the channel's topic; nothing sent after the removal opens with
what that directory holds. Loopback only; every process is killed by PID.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from e2e_helpers import Cluster, Proc, T, cluster, comparable, history
from websockets.sync.client import ClientConnection, connect

from app.members import secrets_file
from app.members.events import encode_share_key
from net.envelope import EnvelopeError, open_for_topic, seal
from net.identity import Identity
from net.relay_frames import decode_frame, encode_publish, encode_subscribe
from sds import sds_pb2
from sds.ids import message_id_for


class Tap:
    """A relay client that records every envelope of its topics (a thread reads all)."""

    def __init__(self, ws: ClientConnection, topics: list[bytes]) -> None:
        self.captured: list[bytes] = []
        self._lock = threading.Lock()
        self._ws = ws
        self._ws.send(encode_subscribe(topics))
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        with contextlib.suppress(Exception):  # ends when the connection closes
            for raw in self._ws:
                frame = decode_frame(bytes(raw))  # type: ignore[arg-type]
                if frame.WhichOneof("body") == "deliver":
                    with self._lock:
                        self.captured.append(bytes(frame.deliver.envelope))

    def count(self) -> int:
        with self._lock:
            return len(self.captured)

    def since(self, mark: int) -> list[bytes]:
        with self._lock:
            return list(self.captured[mark:])

    def close(self) -> None:
        self._ws.close()
        self._thread.join(T(10))


@contextlib.contextmanager
def tap(url: str, topics: list[bytes]) -> Iterator[Tap]:
    with connect(url, max_size=None, proxy=None, ping_interval=None, max_queue=None) as ws:
        t = Tap(ws, topics)
        try:
            yield t
        finally:
            t.close()


def _joined(p: Proc, what: str) -> None:
    p.wait_for(lambda: bool(p.select("members", what=what)), 60, f"members channel {what}")
    p.wait_for(lambda: bool(p.select("connection", state="connected")), 20, "connected")


def _invite(admin: Proc) -> str:
    before = len(admin.select("invite"))
    admin.send("/invite")
    admin.wait_for(lambda: len(admin.select("invite")) > before, 20, "an invite code")
    code: str = admin.select("invite")[-1]["code"]
    return code


def _join_by_invite(c: Cluster, name: str, code: str, url: str,
                    extra: list[str] | None = None) -> Proc:  # fmt: skip
    argv = [sys.executable, "-m", "app.cli", "join", "--invite", code, "--data-dir",
            str(c.tmp / name), "--name", name, "--headless", "--fast", "--relay", url,
            *(extra or [])]  # fmt: skip
    p = c.start(argv, name)
    _joined(p, "joined")
    return p


def _texts(p: Proc) -> list[str]:
    return [e["text"] for e in p.select("delivered") if e.get("kind") == "msg"]


def _sees(p: Proc, *texts: str) -> None:
    try:
        p.wait_for(lambda: set(texts) <= set(_texts(p)), 150, f"delivered {texts}")
    except AssertionError:  # keep every event for the post-mortem, beside the logs
        (p.stderr_path.parent / f"{p.name}.events.jsonl").write_text("\n".join(p.raw))
        raise


def test_invite_chat_remove_and_the_removed_member_opens_nothing_captured_after(
    tmp_path: Path,
) -> None:
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        alice = c.node("alice", url, channel="team", extra=["--create"])
        _joined(alice, "created")
        channel = alice.select("channel")[0]
        assert channel["public"] is False
        topic = bytes.fromhex(channel["topic"])
        with tap(url, [topic]) as relay_tap:
            bob = _join_by_invite(c, "bob", _invite(alice), url)
            # carol's code comes from the command line, beside alice's running node
            argv = [sys.executable, "-m", "app.cli", "invite", "team",
                    "--data-dir", str(tmp_path / "alice"), "--relay", url]  # fmt: skip
            made = subprocess.run(argv, capture_output=True, text=True, timeout=T(60),
                                  check=True)  # fmt: skip
            carol = _join_by_invite(c, "carol", made.stdout.strip(), url)
            alice.send("hello team")
            bob.send("hi from bob")
            carol.send("hi from carol")
            _sees(alice, "hi from bob", "hi from carol")
            _sees(bob, "hello team", "hi from carol")
            _sees(carol, "hello team", "hi from bob")
            alice.send("/members")
            alice.wait_for(lambda: bool(alice.select("members", what="members")), 20, "/members")
            rows = alice.select("members", what="members")[-1]["data"]["members"]
            assert sorted((r["name"], r["role"]) for r in rows) == [
                ("alice", "admin"), ("bob", "member"), ("carol", "member")]  # fmt: skip

            # a used invite is refused with its reason, and changes nothing
            used = _invite(alice)
            dave = _join_by_invite(c, "dave", used, url)
            argv = [sys.executable, "-m", "app.cli", "join", "--invite", used, "--data-dir",
                    str(tmp_path / "eve"), "--name", "eve", "--headless", "--fast",
                    "--relay", url]  # fmt: skip
            eve = c.start(argv, "eve")
            assert eve.wait(T(60)) != 0
            assert any("refused" in e.get("message", "") for e in eve.select("error")), eve.tail()

            removal_ms = int(time.time() * 1000)  # Lamport times are wall-clock ms here
            alice.send("/remove carol")
            for p in (alice, bob, dave):
                p.wait_for(lambda p=p: any(carol_id(carol) in e["data"].get("removed", ())
                                           for e in p.select("members", what="changed")),
                           30, "carol removed")  # fmt: skip
            carol.wait_for(lambda: bool(carol.select("members", what="removed_me")), 30,
                           "told of the removal")  # fmt: skip
            # a line carol types now is refused by her own sdschat, saying why (issue 41 §4)
            carol.send("still here?")
            carol.wait_for(lambda: any(e["message"].startswith(
                "you were removed from #team by alice on ") and "read-only" in e["message"]
                for e in carol.select("error")), 30, "carol's line refused, with the reason")
            # and what her node still sends (syncs) is dropped by the members before their
            # core (a modified client's lines too: tests/members/test_members_channel.py)
            bob.wait_for(lambda: any(e["reason"] == "not_a_member" for e in bob.select("rejected")),
                         30, "carol's envelopes dropped as not_a_member")  # fmt: skip
            carol.close_stdin()
            assert carol.wait(T(30)) == 0, carol.tail()

            mark = relay_tap.count()
            for i in range(5):
                alice.send(f"after removal from alice {i}")
                bob.send(f"after removal from bob {i}")
            _sees(bob, *(f"after removal from alice {i}" for i in range(5)))
            _sees(alice, *(f"after removal from bob {i}" for i in range(5)))
            _sees(dave, *(f"after removal from bob {i}" for i in range(5)))
            after = relay_tap.since(mark)
            assert len(after) >= 10

            # carol's whole data directory: every outer key and Megolm session it holds
            stolen = secrets_file.load(tmp_path / "carol", "team")
            assert stolen is not None and len(stolen.epoch_keys) >= 1
            opened = []
            for env in after:
                try:
                    msg = open_for_topic(env, lambda _t: stolen.opening_keys()).sds_message
                except EnvelopeError:
                    continue
                assert msg is not None
                opened.append((msg.lamport_timestamp, msg.message_id[:8], len(msg.content)))
            # Only resends and repairs of messages from before the removal open (the
            # identical bytes, sealed then): nothing sent after it.
            late = [o for o in opened if o[0] >= removal_ms]
            assert not late, f"{late} of {len(after)} captured envelopes opened"
            assert len(opened) < len(after)
            # ... while bob's opens them all
            bobs = secrets_file.load(tmp_path / "bob", "team")
            assert bobs is not None
            assert all(open_for_topic(env, lambda _t: bobs.opening_keys()) for env in after)
        for p in (alice, bob, dave):
            p.close_stdin()
        for p in (alice, bob, dave):
            assert p.wait(T(30)) == 0, p.tail()
        hists = [comparable(history(tmp_path / n, "team")) for n in ("alice", "bob")]
        assert hists[0] == hists[1]
        assert len(hists[0]) >= 13  # 3 greetings, 10 lines after the removal, control messages
        assert "still here?" not in str(hists[0])  # refused at carol's: never sent


def carol_id(carol: Proc) -> str:
    ready = carol.select("ready")[0]
    return str(ready["sender"])


def test_a_removal_with_30_percent_loss_and_a_member_killed_mid_rekey_converges(
    tmp_path: Path,
) -> None:
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        # bob loses 30% each way: everyone waits long for his lines before calling them lost
        patient = ["--lost-timeout-ms", "120000"]
        alice = c.node("alice", url, channel="team", extra=["--create", *patient])
        _joined(alice, "created")
        lossy = ["--drop-rate", "0.3", "--drop-seed", "7", "--lost-timeout-ms", "120000"]
        bob_argv = ["--data-dir", str(tmp_path / "bob"), "--name", "bob", "--headless",
                    "--fast", "--relay", url, *lossy]  # fmt: skip
        bob = c.start([sys.executable, "-m", "app.cli", "join", "--invite", _invite(alice),
                       *bob_argv], "bob")  # fmt: skip
        _joined(bob, "joined")
        carol = _join_by_invite(c, "carol", _invite(alice), url, patient)
        dave = _join_by_invite(c, "dave", _invite(alice), url, patient)
        for p in (alice, bob, carol, dave):
            p.send(f"before from {p.name}")
        for p in (alice, bob, dave):
            _sees(p, *(f"before from {q.name}" for q in (alice, bob, carol, dave) if q is not p))

        alice.send("/remove carol")
        bob.wait_for(lambda: bool(bob.select("members", what="changed")) or bob.popen.poll()
                     is not None, 30, "bob hears of a change")  # fmt: skip
        bob.kill9()  # mid-rekey: new outer key applied, new Megolm sessions being shared
        lines: dict[str, list[str]] = {"alice": [], "bob": [], "dave": []}
        for i in range(3):
            lines["alice"].append(f"alice while bob is down {i}")
            lines["dave"].append(f"dave while bob is down {i}")
            alice.send(lines["alice"][-1])
            dave.send(lines["dave"][-1])
        bob = c.start([sys.executable, "-m", "app.cli", "join", "team", *bob_argv], "bob")
        bob.wait_for(lambda: bool(bob.select("channel")), 30, "bob back")
        for i in range(3):
            for p in (alice, bob, dave):
                lines[p.name].append(f"after from {p.name} {i}")
                p.send(lines[p.name][-1])
        for p in (alice, dave):
            others = {t for n, ts in lines.items() if n != p.name for t in ts}
            _sees(p, *others)
        # bob, restarted: everything the others sent after the removal (some before his
        # restart, through his 30% loss) ends in his log
        others = {t for n, ts in lines.items() if n != "bob" for t in ts}
        bob.wait_for(lambda: others <= {h["content"] for h in history(tmp_path / "bob", "team")},
                     180, "bob holds every line")  # fmt: skip
        carol.close_stdin()
        for p in (alice, bob, dave, carol):
            p.close_stdin()
        for p in (alice, bob, dave):
            assert p.wait(T(60)) == 0, p.tail()
        hists = [comparable(history(tmp_path / n, "team")) for n in ("alice", "bob", "dave")]
        assert hists[0] == hists[1] == hists[2]


def test_sdschat_invite_refuses_what_it_cannot_do_in_one_line(tmp_path: Path) -> None:
    def invite(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "app.cli", "invite", *args],
                              capture_output=True, text=True, timeout=T(60))  # fmt: skip

    r = invite("team", "--data-dir", str(tmp_path / "nobody"))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [
        f"sdschat invite: #team is not a members channel in {tmp_path / 'nobody'}"]
    r = invite("team", "--data-dir", str(tmp_path), "--ttl", "forever")
    assert r.returncode == 2 and "30m, 2h, 7d" in r.stderr


def _readable_memory(pid: int) -> Iterator[bytes]:
    """Every readable mapping of process ``pid`` (we are root, and its parent)."""
    maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for line in maps:
            fields = line.split()
            if "r" not in fields[1] or (len(fields) > 5 and fields[5] in ("[vvar]", "[vsyscall]")):
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            try:
                mem.seek(start)
                yield mem.read(end - start)
            except OSError:
                continue


def test_the_relay_and_the_store_hold_no_key_and_no_text_of_a_members_channel(
    tmp_path: Path,
) -> None:
    secret_line = "the-launch-code-is-7D1F3A9C"
    with cluster(tmp_path) as c:
        relay, url = c.relay()
        alice = c.node("alice", url, channel="team", extra=["--create"])
        _joined(alice, "created")
        topic = alice.select("channel")[0]["topic"]
        store, _store_url = c.store(url, tmp_path / "store", topics=(bytes.fromhex(topic),),
                                    extra=["--stats-interval", "1"])  # fmt: skip
        bob = _join_by_invite(c, "bob", _invite(alice), url)
        alice.send(secret_line)
        bob.send(secret_line + "-reply")
        _sees(bob, secret_line)
        _sees(alice, secret_line + "-reply")
        archived = len(alice.select("own", state="logged")) + len(bob.select("own", state="logged"))
        store.wait_for(lambda: any(r.get("archived", 0) >= archived for r in store.log_records()
                                   if r.get("event") == "store_stats"),
                       30, "every envelope archived")  # fmt: skip
        mc_a = secrets_file.load(tmp_path / "alice", "team")
        mc_b = secrets_file.load(tmp_path / "bob", "team")
        assert mc_a is not None and mc_b is not None
        needles = {"the text": secret_line.encode()}
        for i, key in enumerate(mc_a.epoch_keys):
            needles[f"outer key {i}"] = key
        needles["alice's share key"] = bytes(mc_a.group_keys.share_secret)
        needles["bob's share key"] = bytes(mc_b.group_keys.share_secret)
        needles["alice's pickle key"] = mc_a.pickle_key
        ident = (tmp_path / "alice" / "identity.pem").read_bytes()
        needles["alice's identity file"] = ident[40:80]
        assert bob.select("delivered")  # the line really crossed the relay and the store saw it
        for who, proc in (("relay", relay), ("store", store)):
            for chunk in _readable_memory(proc.pid):
                for what, needle in needles.items():
                    assert needle not in chunk, f"the {who}'s memory holds {what}"
        for path in (tmp_path / "store").rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                for what, needle in needles.items():
                    assert needle not in data, f"{path} holds {what}"


def test_a_member_flooding_with_fresh_identities_costs_the_others_nothing_in_the_core(
    tmp_path: Path,
) -> None:
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        alice = c.node("alice", url, channel="team", extra=["--create"])
        _joined(alice, "created")
        bob = _join_by_invite(c, "bob", _invite(alice), url)
        bob.send("bob is here")
        _sees(alice, "bob is here")
        stolen = secrets_file.load(tmp_path / "bob", "team")  # bob turns hostile
        assert stolen is not None
        fake_ids = [os.urandom(32).hex() for _ in range(50)]
        flood = []
        ident = Identity.generate()
        for n in range(300):  # 100 fresh identities, 3 envelopes each, 50 unknown ids named
            if n % 3 == 0:
                ident = Identity.generate()
            lamport, content = int(time.time() * 1000) + n, encode_share_key(os.urandom(32))
            mid = message_id_for("team", ident.sender_id, lamport, content, os.urandom(8))
            msg = sds_pb2.SdsMessage(
                sender_id=ident.sender_id, message_id=mid, channel_id="team",
                lamport_timestamp=lamport, content=content,
                causal_history=[sds_pb2.HistoryEntry(message_id=m) for m in fake_ids])  # fmt: skip
            flood.append(seal(msg.SerializeToString(), ident, stolen.sending_key()))
        with contextlib.ExitStack() as stack:
            ws = stack.enter_context(connect(url, max_size=None, proxy=None))
            for env in flood:
                ws.send(encode_publish(env))
        for i in range(10):
            bob.send(f"honest {i}")
        _sees(alice, *(f"honest {i}" for i in range(10)))
        # headless writes a few rejected lines per reason and window, then one line
        # with how many it held back ("suppressed": app/headless/rejected.py)
        alice.wait_for(lambda: sum(e.get("suppressed", 1) for e in alice.select("rejected")
                                   if e["reason"] == "not_a_member") == len(flood),
                       60, "every flooded envelope dropped at the gate")  # fmt: skip
        named = {i for e in alice.select("missing") for i in e["ids"]}
        assert not named & set(fake_ids), "the core tracked ids only fresh identities named"


def test_direct_messages_between_two_members_stay_between_them(tmp_path: Path) -> None:
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        alice = c.node("alice", url, channel="team", extra=["--create"])
        _joined(alice, "created")
        bob = _join_by_invite(c, "bob", _invite(alice), url)
        carol = _join_by_invite(c, "carol", _invite(alice), url)
        alice.send("/msg bob just between us")
        bob.wait_for(lambda: bool(bob.select("members", what="direct")), 60, "offered a DM")
        dm = bob.select("members", what="direct")[0]["channel"]
        assert dm.startswith("dm-") and alice.select("members", what="direct")[0]["channel"] == dm

        def dm_texts(p: Proc) -> list[str]:
            return [e["text"] for e in p.select("delivered")
                    if e["channel"] == dm and e.get("kind") == "msg"]  # fmt: skip

        bob.wait_for(lambda: dm_texts(bob) == ["just between us"], 60, "the DM")
        bob.send("/msg alice got it")
        alice.wait_for(lambda: dm_texts(alice) == ["got it"], 60, "the answer")
        alice.send("/query bob")
        alice.send("second thought")  # the DM is now alice's current channel
        bob.wait_for(lambda: dm_texts(bob) == ["just between us", "second thought"], 60,
                     "a line typed in the query")  # fmt: skip
        alice.send("in the team")  # /query made the DM current: this goes there too
        alice.send("/switch team")
        alice.send("back in the team")
        carol.wait_for(lambda: "back in the team" in _texts(carol), 60, "team line")
        assert not carol.select("members", what="direct")
        assert all(e["channel"] == "team" for e in carol.select("delivered"))
        for p in (alice, bob, carol):
            p.close_stdin()
        for p in (alice, bob, carol):
            assert p.wait(T(60)) == 0, p.tail()
        kept = {h["content"] for h in history(tmp_path / "bob", dm)}
        assert kept >= {"just between us", "got it", "second thought", "in the team"}
        assert "back in the team" not in kept
