"""Interop with the reference implementation, js-waku's ``@waku/sds`` 0.0.8.

The test installs ``@waku/sds@0.0.8`` from the npm registry into
``.cache/npm-waku-sds`` (once; later runs reuse it) and drives real
``MessageChannel`` instances through ``waku_peer.mjs``, a JSON-lines peer
running in one long-lived node process per module. Bytes made by one side are
fed to the other, exactly as a transport would carry them.

The sds side uses ``sds.Config.waku()`` (js-waku's sizes: the profile a channel
shared with js-waku peers must use) unless a test says otherwise; the tests at
the end record what happens between @waku/sds and sdschat's default sizes.

Skipped, with the reason printed, only when ``node`` or ``npm`` is not installed.
If they are installed and the package cannot be installed, the tests fail.

Timeouts scale with the environment variable ``SDSCHAT_TEST_TIMEOUT_SCALE``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import queue
import random
import shutil
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import sds

WAKU_SDS_VERSION = "0.0.8"
ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "npm-waku-sds"
PEER_SCRIPT = Path(__file__).with_name("waku_peer.mjs")
SCALE = float(os.environ.get("SDSCHAT_TEST_TIMEOUT_SCALE") or "1")
INSTALL_TIMEOUT_S = 300 * SCALE
STARTUP_TIMEOUT_S = 30 * SCALE
CALL_TIMEOUT_S = 30 * SCALE

CHANNEL = "interop-room"


# --------------------------------------------------------------------------- install


def _installed_ok(marker: Path) -> bool:
    pkg = CACHE / "node_modules" / "@waku" / "sds" / "package.json"
    if not (marker.exists() and pkg.exists()):
        return False
    try:
        return json.loads(pkg.read_text())["version"] == WAKU_SDS_VERSION
    except (OSError, ValueError, KeyError):
        return False


@contextlib.contextmanager
def _install_lock(deadline: float) -> Iterator[None]:
    """Serialise installs between concurrent test runs sharing the cache."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".install.lock", "w") as lock:
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(f"timed out waiting for the install lock in {CACHE}")
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def ensure_waku_sds() -> Path:
    """Install @waku/sds@0.0.8 into the cache folder if it is not there yet."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        reason = f"{' and '.join(missing)} not installed: @waku/sds interop tests skipped"
        print(f"\nSKIP: {reason}", file=sys.stderr)
        pytest.skip(reason)
    marker = CACHE / f".installed-waku-sds-{WAKU_SDS_VERSION}"
    if _installed_ok(marker):
        return CACHE
    deadline = time.monotonic() + INSTALL_TIMEOUT_S
    with _install_lock(deadline):
        if _installed_ok(marker):  # another run installed it meanwhile
            return CACHE
        marker.unlink(missing_ok=True)
        cmd = [
            "npm", "install", "--prefix", str(CACHE), f"@waku/sds@{WAKU_SDS_VERSION}",
            "--no-audit", "--no-fund",
        ]  # fmt: skip
        env = {**os.environ, "npm_config_update_notifier": "false"}
        try:
            done = subprocess.run(
                cmd,
                cwd=CACHE,
                env=env,
                capture_output=True,
                text=True,
                timeout=max(1.0, deadline - time.monotonic()),
                check=False,
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"`{' '.join(cmd)}` did not finish within {INSTALL_TIMEOUT_S:.0f} s")
        if done.returncode != 0:
            pytest.fail(
                f"`{' '.join(cmd)}` failed (exit {done.returncode}):\n"
                f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            )
        marker.write_text(f"{WAKU_SDS_VERSION}\n")
        if not _installed_ok(marker):
            pytest.fail(f"npm install ran but @waku/sds@{WAKU_SDS_VERSION} is not in {CACHE}")
    return CACHE


# --------------------------------------------------------------------------- the node peer


class JsError(AssertionError):
    """The node peer answered {"ok": false}."""


class WakuProcess:
    """One ``node waku_peer.mjs`` process; every call has a bounded timeout."""

    def __init__(self, prefix: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "NODE_OPTIONS")}
        self.proc = subprocess.Popen(
            ["node", str(PEER_SCRIPT), str(prefix)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
            env=env,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: deque[str] = deque(maxlen=200)
        self._threads = [
            threading.Thread(target=self._pump_stdout, daemon=True),
            threading.Thread(target=self._pump_stderr, daemon=True),
        ]
        for t in self._threads:
            t.start()
        self._names = 0

    def _pump_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line.rstrip("\n"))

    def stderr_tail(self) -> str:
        return "\n".join(self._stderr)

    def call(self, op: str, timeout: float = CALL_TIMEOUT_S, **params: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps({"op": op, **params}) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pytest.fail(f"node peer is gone (exit {self.proc.poll()}):\n{self.stderr_tail()}")
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"node peer did not answer {op!r} within {timeout:.0f} s")
        if line is None:
            self._lines.put(None)
            pytest.fail(f"node peer exited (code {self.proc.poll()}):\n{self.stderr_tail()}")
        answer: dict[str, Any] = json.loads(line)
        if not answer.pop("ok"):
            raise JsError(f"@waku/sds peer, op {op!r}: {answer.get('error')}")
        return answer

    def channel(self, sender: str, channel: str = CHANNEL, **options: Any) -> JsChannel:
        """A new MessageChannel in the node process (MessageChannelOptions as keywords)."""
        self._names += 1
        name = f"p{self._names}"
        self.call("create", peer=name, channel=channel, sender=sender, options=options)
        return JsChannel(self, name, sender)

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(Exception):
                self.call("quit", timeout=5 * SCALE)
            try:
                self.proc.wait(timeout=10 * SCALE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10 * SCALE)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                with contextlib.suppress(Exception):
                    stream.close()
        for t in self._threads:
            t.join(timeout=5 * SCALE)


@dataclass(frozen=True)
class Sent:
    id: str
    data: bytes
    lamport: int | None = None


class JsChannel:
    """A js-waku MessageChannel living in the node process."""

    def __init__(self, proc: WakuProcess, name: str, sender: str) -> None:
        self.proc = proc
        self.name = name
        self.sender = sender

    def _call(self, op: str, **params: Any) -> dict[str, Any]:
        return self.proc.call(op, peer=self.name, **params)

    def send(self, content: bytes, hint: bytes | None = None) -> Sent:
        r = self._call("send", content_hex=content.hex(), hint_hex=hint.hex() if hint else None)
        assert r["task_errors"] == []
        return Sent(r["id"], bytes.fromhex(r["data_hex"]), int(r["lamport_timestamp"]))

    def send_ephemeral(self, content: bytes) -> Sent:
        r = self._call("send_ephemeral", content_hex=content.hex())
        assert r["task_errors"] == []
        return Sent(r["id"], bytes.fromhex(r["data_hex"]))

    def sync(self) -> Sent | None:
        r = self._call("sync")
        if not r["sent"]:
            return None
        return Sent(r["id"], bytes.fromhex(r["data_hex"]))

    def receive(self, data: bytes, hint: bytes | None = None) -> dict[str, Any]:
        r = self._call("receive", data_hex=data.hex(), hint_hex=hint.hex() if hint else None)
        assert r["decoded"], "@waku/sds could not decode the message"
        assert r["task_errors"] == [], f"@waku/sds failed processing it: {r['task_errors']}"
        return r

    def events(self, type_suffix: str | None = None) -> list[dict[str, Any]]:
        """Drain the events; with ``type_suffix`` keep only those (e.g. "message-delivered")."""
        events: list[dict[str, Any]] = self._call("events")["events"]
        if type_suffix is None:
            return events
        return [e for e in events if e["type"].endswith(type_suffix)]

    def outgoing(self) -> list[str]:
        ids: list[str] = self._call("outgoing")["ids"]
        return ids

    def incoming(self) -> list[str]:
        ids: list[str] = self._call("incoming")["ids"]
        return ids

    def history(self) -> list[str]:
        ids: list[str] = self._call("history")["ids"]
        return ids

    def history_entries(self) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = self._call("history")["entries"]
        return entries

    def sweep_incoming(self) -> list[dict[str, Any]]:
        missing: list[dict[str, Any]] = self._call("sweep_incoming")["missing"]
        return missing

    def sweep_repair(self) -> list[Sent]:
        return [
            Sent(m["id"], bytes.fromhex(m["data_hex"]))
            for m in self._call("sweep_repair")["messages"]
        ]


def js_decode(proc: WakuProcess, data: bytes) -> dict[str, Any]:
    """What @waku/sds's Message.decode reads out of ``data``."""
    r = proc.call("decode", data_hex=data.hex())
    assert r["decoded"], "@waku/sds Message.decode returned undefined"
    message: dict[str, Any] = r["message"]
    return message


@pytest.fixture(scope="module")
def waku() -> Iterator[WakuProcess]:
    prefix = ensure_waku_sds()
    proc = WakuProcess(prefix)
    try:
        version = proc.call("version", timeout=STARTUP_TIMEOUT_S)
        assert version["version"] == WAKU_SDS_VERSION
        yield proc
    finally:
        proc.close()


# --------------------------------------------------------------------------- the sds side


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class PyPeer:
    """An ``sds.Channel`` fed with wall-clock time (so its Lamport clock is comparable
    with js-waku's, which reads ``Date.now()``); time only moves forward.
    """

    def __init__(
        self, sender: str, config: sds.Config | None = None, seed: int = 1, channel: str = CHANNEL
    ) -> None:
        self.sender = sender
        self.now = wall_ms()
        self.ch = sds.Channel(
            channel, sender, config or sds.Config.waku(), now_ms=self.now, rng=random.Random(seed)
        )
        self.all_events: list[Any] = []

    def tick(self) -> int:
        self.now = max(self.now, wall_ms())
        return self.now

    def drain(self) -> list[Any]:
        events = list(self.ch.events())
        self.all_events.extend(events)
        return events

    def send(self, content: bytes) -> Sent:
        data = self.ch.send(content, self.tick())
        msg = sds.decode(data)
        return Sent(msg.message_id, data, msg.lamport_timestamp)

    def send_ephemeral(self, content: bytes) -> Sent:
        data = self.ch.send_ephemeral(content, self.tick())
        return Sent(sds.decode(data).message_id, data)

    def receive(self, data: bytes, hint: bytes | None = None) -> list[Any]:
        """Feed bytes; return the events this produced."""
        self.ch.receive(data, self.tick(), retrieval_hint=hint)
        return self.drain()

    def run_timers(
        self, until: Callable[[list[sds.Datagram]], bool], horizon_ms: int, max_steps: int = 500
    ) -> list[sds.Datagram]:
        """Advance time timer by timer (at most ``horizon_ms`` ahead) until ``until``
        holds for the datagrams produced so far; return them.
        """
        limit = self.tick() + horizon_ms
        out: list[sds.Datagram] = []
        for _ in range(max_steps):
            out.extend(self.ch.datagrams_to_send())
            if until(out):
                return out
            due = self.ch.get_timer()
            if due is None or due > limit:
                break
            self.now = max(self.now, due)
            self.ch.handle_timer(self.now)
        out.extend(self.ch.datagrams_to_send())
        assert until(out), f"no such datagram within {horizon_ms} ms of timers: {out!r}"
        return out


def of_type(events: list[Any], cls: type) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]


def delivered_ids(events: list[Any]) -> list[str]:
    return [e.message_id for e in of_type(events, sds.MessageDelivered)]


def acked_ids(events: list[Any]) -> list[str]:
    return [e.message_id for e in of_type(events, sds.MessageAcknowledged)]


def of_kind(js_events: list[dict[str, Any]], type_suffix: str) -> list[dict[str, Any]]:
    """The js events whose type ends with ``type_suffix``."""
    return [e for e in js_events if e["type"].endswith(type_suffix)]


def kind_of(data: bytes) -> str:
    return sds.decode(data).kind.value


def entry_json(entry: sds.HistoryEntry) -> dict[str, Any]:
    return {
        "message_id": entry.message_id,
        "retrieval_hint_hex": None if entry.retrieval_hint is None else entry.retrieval_hint.hex(),
        "sender_id": entry.sender_id,
    }


def as_js_json(msg: sds.Message) -> dict[str, Any]:
    """An sds.Message in the shape waku_peer.mjs uses for decoded messages."""
    return {
        "kind": msg.kind.value,
        "message_id": msg.message_id,
        "channel_id": msg.channel_id,
        "sender_id": msg.sender_id,
        "lamport_timestamp": None if msg.lamport_timestamp is None else str(msg.lamport_timestamp),
        "causal_history": [entry_json(e) for e in msg.causal_history],
        "bloom_filter_hex": None if msg.bloom_filter is None else msg.bloom_filter.hex(),
        "repair_request": [entry_json(e) for e in msg.repair_request],
        "content_hex": None if msg.content is None else msg.content.hex(),
    }


def assert_same_decoding(waku: WakuProcess, data: bytes, made_by_js: bool) -> sds.Message:
    """Both implementations read the same fields out of ``data``.

    For js-made bytes, also: sds.encode() of what sds decoded gives the very same
    bytes (both write canonical field order). sds's own encoder may append causal
    history entries after the other fields, which protobuf parsers (js's included)
    accept, so that property is not asked of sds-made bytes.
    """
    msg = sds.decode(data)
    assert as_js_json(msg) == js_decode(waku, data)
    if made_by_js:
        assert sds.encode(msg) == data
    return msg


# --------------------------------------------------------------------------- tests


def test_js_content_messages_decode_and_deliver_in_order_in_sds(waku: WakuProcess) -> None:
    """Content messages made by @waku/sds decode field for field in sds, and sds
    delivers them exactly once in causal order even when they arrive reversed.
    """
    alice = waku.channel("js-alice")
    bob = PyPeer("py-bob")
    sent = [alice.send(f"js says {i}".encode(), hint=f"hint-{i}".encode()) for i in range(3)]

    for i, s in enumerate(sent):
        msg = assert_same_decoding(waku, s.data, made_by_js=True)
        assert msg.kind is sds.MessageKind.CONTENT
        assert msg.sender_id == "js-alice" and msg.channel_id == CHANNEL
        assert msg.message_id == s.id == hashlib.sha256(f"js says {i}".encode()).hexdigest()
        assert msg.lamport_timestamp == s.lamport  # a uint64 ms clock, well beyond int32
        assert msg.content == f"js says {i}".encode()
        assert msg.bloom_filter is not None and len(msg.bloom_filter) == 18_752
        # js-waku puts its own earlier messages in the causal history, with the
        # retrieval hint its transport callback returned and the sender id.
        assert msg.causal_history == tuple(
            sds.HistoryEntry(sent[j].id, f"hint-{j}".encode(), "js-alice") for j in range(i)
        )

    events: list[Any] = []
    for s in reversed(sent[1:]):
        events += bob.receive(s.data)
    assert delivered_ids(events) == []
    events += bob.receive(sent[0].data)
    delivered = of_type(events, sds.MessageDelivered)
    assert [e.message_id for e in delivered] == [s.id for s in sent]
    assert [e.content for e in delivered] == [f"js says {i}".encode() for i in range(3)]
    assert [e.lamport for e in delivered] == [s.lamport for s in sent]
    assert {e.sender_id for e in delivered} == {"js-alice"}

    # Exactly once: the same bytes again are a duplicate, not a second delivery.
    again = bob.receive(sent[1].data)
    assert delivered_ids(again) == []
    assert [e.reason for e in of_type(again, sds.MessageDropped)] == [sds.DropReason.DUPLICATE]


def test_sds_content_messages_decode_and_deliver_in_js(waku: WakuProcess) -> None:
    """Content messages made by sds decode in @waku/sds as content messages with the
    same fields, and MessageChannel delivers them (InMessageDelivered; local history
    holds them in sds's order) even when they arrive reversed.
    """
    bob = PyPeer("py-bob")
    carol = waku.channel("js-carol")
    sent = [bob.send(f"py says {i}".encode()) for i in range(3)]
    assert of_type(bob.drain(), sds.MessageSent)

    for i, s in enumerate(sent):
        msg = assert_same_decoding(waku, s.data, made_by_js=False)
        assert msg.kind is sds.MessageKind.CONTENT
        assert msg.sender_id == "py-bob" and msg.channel_id == CHANNEL
        assert msg.content == f"py says {i}".encode()
        # Unique 64-hex ids (not sha256(content)); history names the earlier ones
        # with their sender, which js-waku's SDS-R needs.
        assert len(s.id) == 64 and s.id == s.id.lower() and int(s.id, 16) >= 0
        assert [(e.message_id, e.sender_id) for e in msg.causal_history] == [
            (sent[j].id, "py-bob") for j in range(i)
        ]
        assert msg.bloom_filter is not None and len(msg.bloom_filter) == 18_752

    for s in reversed(sent[1:]):
        carol.receive(s.data)
    assert carol.events("message-delivered") == []
    assert carol.incoming() == [sent[2].id, sent[1].id]
    carol.receive(sent[0].data)
    assert [e["detail"] for e in carol.events("message-delivered")] == [sent[0].id]
    # MessageChannel re-examines buffered messages only when the app sweeps.
    assert carol.sweep_incoming() == []
    assert carol.incoming() == []
    delivered = [e["detail"] for e in carol.events("message-delivered")]
    assert sorted(delivered) == sorted(s.id for s in sent[1:])

    entries = carol.history_entries()
    assert [e["message_id"] for e in entries] == [s.id for s in sent]
    assert [bytes.fromhex(e["content_hex"]) for e in entries] == [
        f"py says {i}".encode() for i in range(3)
    ]
    assert [int(e["lamport_timestamp"]) for e in entries] == [s.lamport for s in sent]
    assert {e["sender_id"] for e in entries} == {"py-bob"}


def test_missing_dependencies_reported_in_sds(waku: WakuProcess) -> None:
    """A js message whose causal history names an unseen message is held by sds and
    reported missing, with the retrieval hint and sender js attached; it is
    delivered after the dependency arrives.
    """
    alice = waku.channel("js-alice")
    bob = PyPeer("py-bob")
    first = alice.send(b"first", hint=b"store-cursor-1")
    second = alice.send(b"second")

    events = bob.receive(second.data)
    assert delivered_ids(events) == []
    missing = of_type(events, sds.MessagesMissing)
    assert len(missing) == 1
    assert missing[0].message_id == second.id and missing[0].sender_id == "js-alice"
    assert missing[0].missing == (sds.HistoryEntry(first.id, b"store-cursor-1", "js-alice"),)

    events = bob.receive(first.data)
    assert delivered_ids(events) == [first.id, second.id]


def test_missing_dependencies_reported_in_js(waku: WakuProcess) -> None:
    """An sds message whose causal history names an unseen message is buffered by
    MessageChannel and reported with InMessageMissing (naming the sds sender, as
    SDS-R needs); it is delivered once the dependency arrives.
    """
    bob = PyPeer("py-bob")
    carol = waku.channel("js-carol")
    first = bob.send(b"first")
    second = bob.send(b"second")

    carol.receive(second.data)
    events = carol.events()
    assert of_kind(events, "message-delivered") == []
    missing = [entry for e in of_kind(events, "message-missing") for entry in e["detail"]]
    assert {(m["message_id"], m["sender_id"]) for m in missing} == {(first.id, "py-bob")}
    assert carol.incoming() == [second.id]

    carol.receive(first.data)
    carol.sweep_incoming()
    assert [e["detail"] for e in carol.events("message-delivered")] == [first.id, second.id]
    assert carol.history() == [first.id, second.id]


def test_causal_history_acks_sds_message_in_js_reply(waku: WakuProcess) -> None:
    """An sds message is acknowledged in sds when a js message arrives whose causal
    history contains it (carrying the retrieval hint js's transport gave it).
    """
    bob = PyPeer("py-bob")
    carol = waku.channel("js-carol")
    mine = bob.send(b"did you get this?")
    bob.drain()

    carol.receive(mine.data, hint=b"envelope-of-mine")
    reply = carol.send(b"yes")
    history = sds.decode(reply.data).causal_history
    assert sds.HistoryEntry(mine.id, b"envelope-of-mine", "py-bob") in history

    events = bob.receive(reply.data)
    acks = of_type(events, sds.MessageAcknowledged)
    assert [(a.message_id, a.by_causal_history) for a in acks] == [(mine.id, True)]
    assert delivered_ids(events) == [reply.id]


def test_causal_history_acks_js_message_in_sds_reply(waku: WakuProcess) -> None:
    """A js message leaves MessageChannel's outgoing buffer (OutMessageAcknowledged)
    when an sds message arrives whose causal history contains it (carrying the
    retrieval hint sds's transport gave it).
    """
    alice = waku.channel("js-alice")
    bob = PyPeer("py-bob")
    theirs = alice.send(b"did you get this?")
    assert alice.outgoing() == [theirs.id]

    assert delivered_ids(bob.receive(theirs.data, hint=b"envelope-of-theirs")) == [theirs.id]
    reply = bob.send(b"yes")
    history = sds.decode(reply.data).causal_history
    assert sds.HistoryEntry(theirs.id, b"envelope-of-theirs", "js-alice") in history

    alice.receive(reply.data)
    assert [e["detail"] for e in alice.events("message-acknowledged")] == [theirs.id]
    assert alice.outgoing() == []
    assert alice.history() == [theirs.id, reply.id]


def test_js_bloom_filters_possibly_acknowledge_sds_message(waku: WakuProcess) -> None:
    """An sds message found in js senders' bloom filters (but not in their causal
    histories) gains possible acks in sds, one per distinct js sender; a second
    distinct sender makes it acknowledged, while repeated evidence from one sender
    does not (js-waku would count it twice).
    """
    anna = PyPeer("py-anna")
    filler = PyPeer("py-filler", seed=2)
    # causalHistorySize 1: what a long conversation does to an older message; it
    # leaves the causal history window but stays in the bloom filter.
    js1 = waku.channel("js-one", causalHistorySize=1)
    js2 = waku.channel("js-two", causalHistorySize=1)

    mine = anna.send(b"anyone there?")
    assert mine.lamport is not None
    filler.now = mine.lamport + 10  # a later message that does not reference mine
    later = filler.send(b"unrelated")
    assert mine.id not in [e.message_id for e in sds.decode(later.data).causal_history]
    anna.receive(later.data)
    anna.drain()
    for js in (js1, js2):
        js.receive(mine.data)
        js.receive(later.data)

    def only_in_filter(sent: Sent) -> None:
        msg = sds.decode(sent.data)
        assert mine.id not in [e.message_id for e in msg.causal_history]
        assert msg.bloom_filter is not None
        bloom = sds.BloomFilter.from_bytes(msg.bloom_filter, capacity=10_000, error_rate=0.001)
        assert mine.id in bloom

    x1 = js1.send(b"js-one talks")
    only_in_filter(x1)
    events = anna.receive(x1.data)
    assert acked_ids(events) == []
    possible = of_type(events, sds.MessagePossiblyAcknowledged)
    assert [(p.message_id, p.hits, p.by_sender) for p in possible] == [(mine.id, 1, "js-one")]
    assert possible[0].threshold == 2

    x1b = js1.send(b"js-one talks again")
    only_in_filter(x1b)
    events = anna.receive(x1b.data)
    assert acked_ids(events) == [], "two filters from one sender must not make an ack"

    x2 = js2.send(b"js-two talks")
    only_in_filter(x2)
    events = anna.receive(x2.data)
    acks = of_type(events, sds.MessageAcknowledged)
    assert [(a.message_id, a.by_causal_history) for a in acks] == [(mine.id, False)]


def test_sds_bloom_filters_possibly_acknowledge_js_message(waku: WakuProcess) -> None:
    """A js message found in sds senders' bloom filters (but not in their causal
    histories) is possibly acknowledged in MessageChannel (count 1), then
    acknowledged at js-waku's threshold of 2.
    """
    alice = waku.channel("js-alice")
    small_window = sds.Config.waku(causal_history_size=1)
    p1 = PyPeer("py-one", small_window, seed=3)
    p2 = PyPeer("py-two", small_window, seed=4)
    filler = PyPeer("py-filler", seed=5)

    theirs = alice.send(b"anyone there?")
    assert theirs.lamport is not None
    filler.now = theirs.lamport + 10
    later = filler.send(b"unrelated")
    alice.receive(later.data)
    for p in (p1, p2):
        p.receive(theirs.data)
        p.receive(later.data)
    alice.events()

    replies = []
    for p in (p1, p2):
        reply = p.send(f"{p.sender} talks".encode())
        msg = sds.decode(reply.data)
        assert [e.message_id for e in msg.causal_history] == [later.id]
        assert msg.bloom_filter is not None
        # js's own reading of sds's filter
        found = waku.call(
            "bloom_lookup",
            data_hex=msg.bloom_filter.hex(),
            capacity=10_000,
            error_rate=0.001,
            ids=[theirs.id, later.id],
        )["found"]
        assert found == [True, True]
        replies.append(reply)

    alice.receive(replies[0].data)
    events = alice.events()
    possible = [e["detail"] for e in events if e["type"].endswith("possibly-acknowledged")]
    assert possible == [{"messageId": theirs.id, "count": 1}]
    assert [e for e in events if e["type"].endswith(":message-acknowledged")] == []
    assert alice.outgoing() == [theirs.id]

    alice.receive(replies[1].data)
    acked = [e["detail"] for e in alice.events(":message-acknowledged")]
    assert acked == [theirs.id]
    assert alice.outgoing() == []


def test_js_sync_message_processed_by_sds(waku: WakuProcess) -> None:
    """A js sync message decodes in sds as a sync message, is reported as received,
    acknowledges what its causal history lists, and is not delivered or logged.
    """
    bob = PyPeer("py-bob")
    carol = waku.channel("js-carol")
    assert carol.sync() is None  # js-waku sends no sync with an empty history

    mine = bob.send(b"hello js")
    bob.drain()
    carol.receive(mine.data)
    sync = carol.sync()
    assert sync is not None
    msg = assert_same_decoding(waku, sync.data, made_by_js=True)
    assert msg.kind is sds.MessageKind.SYNC
    assert msg.content is None and msg.lamport_timestamp is not None
    assert msg.message_id == sync.id and sync.id.startswith("sync-")
    assert [e.message_id for e in msg.causal_history] == [mine.id]

    events = bob.receive(sync.data)
    received = of_type(events, sds.SyncReceived)
    assert [(e.message_id, e.sender_id) for e in received] == [(sync.id, "js-carol")]
    assert acked_ids(events) == [mine.id]
    assert delivered_ids(events) == []


def test_sds_sync_message_processed_by_js(waku: WakuProcess) -> None:
    """An sds sync message (sent when its sync timer fires) decodes in @waku/sds as a
    sync message, raises InSyncReceived, acknowledges the js message in its causal
    history, and adds nothing to MessageChannel's history.
    """
    alice = waku.channel("js-alice")
    bob = PyPeer("py-bob")
    theirs = alice.send(b"hello py")
    assert delivered_ids(bob.receive(theirs.data)) == [theirs.id]

    datagrams = bob.run_timers(
        lambda ds: any(d.kind == "sync" for d in ds),
        horizon_ms=sds.Config().sync_interval_ms * 2,
    )
    sync_data = next(d.data for d in datagrams if d.kind == "sync")
    assert kind_of(sync_data) == "sync"
    msg = assert_same_decoding(waku, sync_data, made_by_js=False)
    assert js_decode(waku, sync_data)["kind"] == "sync"
    assert [e.message_id for e in msg.causal_history] == [theirs.id]

    alice.receive(sync_data)
    events = alice.events()
    assert [e["detail"]["message_id"] for e in events if e["type"].endswith("sync-received")] == [
        msg.message_id
    ]
    assert [e["detail"] for e in events if e["type"].endswith(":message-acknowledged")] == [
        theirs.id
    ]
    assert alice.outgoing() == []
    assert alice.history() == [theirs.id]


def test_js_ephemeral_message_received_by_sds(waku: WakuProcess) -> None:
    """A js ephemeral message decodes in sds as ephemeral and is handed to the app
    (EphemeralReceived) without entering the log.
    """
    alice = waku.channel("js-alice")
    bob = PyPeer("py-bob")
    eph = alice.send_ephemeral(b"alice is typing")
    msg = assert_same_decoding(waku, eph.data, made_by_js=True)
    assert msg.kind is sds.MessageKind.EPHEMERAL
    assert msg.lamport_timestamp is None and msg.bloom_filter is None

    events = bob.receive(eph.data)
    got = of_type(events, sds.EphemeralReceived)
    assert [(e.sender_id, e.content) for e in got] == [("js-alice", b"alice is typing")]
    assert delivered_ids(events) == []


def test_sds_ephemeral_message_received_by_js(waku: WakuProcess) -> None:
    """An sds ephemeral message decodes in @waku/sds as an EphemeralMessage, which
    MessageChannel accepts without error, without delivery and without logging it.
    """
    bob = PyPeer("py-bob")
    carol = waku.channel("js-carol")
    eph = bob.send_ephemeral(b"bob is typing")
    decoded = js_decode(waku, eph.data)
    assert decoded["kind"] == "ephemeral"
    assert decoded["lamport_timestamp"] is None
    assert bytes.fromhex(decoded["content_hex"]) == b"bob is typing"
    assert decoded["sender_id"] == "py-bob"

    assert carol.receive(eph.data)["kind"] == "ephemeral"
    assert carol.events("message-delivered") == []
    assert carol.history() == []


BLOOM_SIZES = [
    (10_000, 0.001, 0),
    (10_000, 0.001, 1),
    (10_000, 0.001, 3_000),
    (100, 0.01, 50),
    (100, 0.01, 500),  # five times over capacity: still the same bytes
    (1_000, 0.1, 700),
    (5_000, 0.0001, 1_200),
    (1, 0.5, 3),
]


def bloom_ids(n: int) -> list[str]:
    """64-hex ids like both implementations use, plus the odd ASCII id."""
    ids = [hashlib.sha256(f"id-{i}".encode()).hexdigest() for i in range(n)]
    odd = ["", "a", "sync-4fzyo82mvyr", "x" * 300, "Mixed-Case_ID.42"]
    return ids + odd[: min(n, len(odd))]


@pytest.mark.parametrize(("capacity", "error_rate", "n"), BLOOM_SIZES)
def test_bloom_filter_bytes_identical_to_js(
    waku: WakuProcess, capacity: int, error_rate: float, n: int
) -> None:
    """For the same inserted ids, sds.BloomFilter.to_bytes() equals js-waku's
    DefaultBloomFilter.toBytes(), and each side reads the other's bytes with the
    same answers, false positives included.
    """
    ids = bloom_ids(n)
    js = waku.call("bloom", capacity=capacity, error_rate=error_rate, ids=ids)
    js_bytes = bytes.fromhex(js["data_hex"])

    ours = sds.BloomFilter(capacity=capacity, error_rate=error_rate)
    for i in ids:
        ours.add(i)
    assert ours.to_bytes() == js_bytes

    probes = ids[:200] + [hashlib.sha256(f"absent-{i}".encode()).hexdigest() for i in range(300)]
    from_js = sds.BloomFilter.from_bytes(js_bytes, capacity=capacity, error_rate=error_rate)
    assert all(i in from_js for i in ids)
    ours_answers = [p in ours for p in probes]
    js_answers = waku.call(
        "bloom_lookup",
        data_hex=ours.to_bytes().hex(),
        capacity=capacity,
        error_rate=error_rate,
        ids=probes,
    )["found"]
    assert js_answers == ours_answers


def test_rolling_bloom_filter_bytes_identical_to_js(waku: WakuProcess) -> None:
    """sds's rolling filter, before and after it rolls over, puts on the wire exactly
    the bytes js-waku's filter has for the ids it currently holds.
    """
    capacity, error_rate = 100, 0.01
    rolling = sds.RollingBloomFilter(capacity=capacity, error_rate=error_rate)
    ids = bloom_ids(260)
    for count, i in enumerate(ids, 1):
        rolling.add(i)
        if count in (60, 100, 101, 260):
            held = rolling.items()
            assert held == ids[count - len(held) : count]  # the most recent ones
            js = waku.call("bloom", capacity=capacity, error_rate=error_rate, ids=held)
            assert rolling.to_bytes() == bytes.fromhex(js["data_hex"]), count


def _repair_cases() -> list[dict[str, Any]]:
    rnd = random.Random(7)
    cases = []
    for i in range(40):
        own = f"participant-{rnd.randrange(10**6)}"
        sender = own if i % 5 == 0 else f"participant-{rnd.randrange(10**6)}"
        cases.append(
            {
                "own_id": own,
                "original_sender": sender,
                "message_id": hashlib.sha256(str(i).encode()).hexdigest(),
                "t_min": [30_000, 0, 1_000][i % 3],
                "t_max": [120_000, 1, 5_000][i % 3],
                "groups": [1, 2, 3, 7][i % 4],
            }
        )
    return cases


def test_repair_schedule_matches_js(waku: WakuProcess) -> None:
    """SDS-R timing agrees with js-waku's RepairManager: the same H(x), request delay
    T_req, response delay T_resp and response-group membership, so mixed groups
    agree on who answers first.
    """
    from sds import repair

    strings = ["", "abc", "py-bob", hashlib.sha256(b"m").hexdigest()]
    cases = _repair_cases()
    js = waku.call("repair_schedule", strings=strings, cases=cases)
    assert [int(h) for h in js["hashes"]] == [repair.repair_hash(s) for s in strings]
    for case, got in zip(cases, js["cases"], strict=True):
        own, sender, mid = case["own_id"], case["original_sender"], case["message_id"]
        assert got["t_req"] == repair.t_req(own, mid, 0, case["t_min"], case["t_max"]), case
        assert got["t_resp"] == repair.t_resp(own, sender, mid, 0, case["t_max"]), case
        assert got["in_group"] == repair.in_response_group(own, sender, mid, case["groups"]), case


# js-waku repair timing squeezed to "now" (T_req and T_resp offsets are taken modulo
# a 1 ms range), so the test need not wait 30 to 120 s of wall-clock time.
JS_IMMEDIATE_REPAIR = {"repairConfig": {"tMin": 0, "tMax": 1}}


def test_js_repair_request_answered_by_sds(waku: WakuProcess) -> None:
    """SDS-R from js to sds: MessageChannel, missing an sds message, sends a sync
    message whose repair_request names it (with its sender); sds decodes the
    request, rebroadcasts the message, and js then delivers everything.
    """
    bob = PyPeer("py-bob")
    carol = waku.channel("js-carol", **JS_IMMEDIATE_REPAIR)
    first = bob.send(b"first")
    second = bob.send(b"second")
    bob.drain()

    carol.receive(second.data)
    events = carol.events()
    # 0.0.8 dispatches this event as "RepairRequestQueued", not under its documented
    # MessageChannelEvent name "sds:repair:request-queued" (see waku_peer.mjs).
    assert of_kind(events, "repair:request-queued") == []
    queued = [e["detail"]["messageId"] for e in of_kind(events, "RepairRequestQueued")]
    assert queued == [first.id]
    request = carol.sync()
    assert request is not None
    msg = assert_same_decoding(waku, request.data, made_by_js=True)
    assert msg.kind is sds.MessageKind.SYNC
    assert [(e.message_id, e.sender_id) for e in msg.repair_request] == [(first.id, "py-bob")]

    events = bob.receive(request.data)
    asked = of_type(events, sds.RepairRequestReceived)
    assert [(e.sender_id, e.message_ids) for e in asked] == [("js-carol", (first.id,))]
    assert first.id in asked[0].scheduled
    datagrams = bob.run_timers(
        lambda ds: any(d.kind == "repair" and d.message_id == first.id for d in ds),
        horizon_ms=sds.Config().repair_t_max_ms,
    )
    assert [e.message_id for e in of_type(bob.drain(), sds.RepairSent)] == [first.id]
    repaired = next(d.data for d in datagrams if d.kind == "repair")
    assert repaired == first.data

    carol.receive(repaired)
    carol.sweep_incoming()
    assert sorted(e["detail"] for e in carol.events("message-delivered")) == sorted(
        [first.id, second.id]
    )
    assert carol.history() == [first.id, second.id]


def test_sds_repair_request_answered_by_js(waku: WakuProcess) -> None:
    """SDS-R from sds to js: sds, missing a js message, sends a repair request naming
    it (with js's sender id) once T_req passes; MessageChannel decodes it, queues a
    repair response and rebroadcasts the message, which sds then delivers.
    """
    alice = waku.channel("js-alice", **JS_IMMEDIATE_REPAIR)
    bob = PyPeer("py-bob")
    first = alice.send(b"first")
    second = alice.send(b"second")

    events = bob.receive(second.data)
    assert [e.message_id for e in of_type(events, sds.MessagesMissing)] == [second.id]

    def carries_request(ds: list[sds.Datagram]) -> bool:
        return any(sds.decode(d.data).repair_request for d in ds)

    cfg = sds.Config.waku()
    datagrams = bob.run_timers(carries_request, horizon_ms=cfg.repair_t_max_ms + 1_000)
    request = next(d.data for d in datagrams if sds.decode(d.data).repair_request)
    requested = [e.message_ids for e in of_type(bob.drain(), sds.RepairRequested)]
    assert requested == [(first.id,)]
    decoded = js_decode(waku, request)
    assert [(e["message_id"], e["sender_id"]) for e in decoded["repair_request"]] == [
        (first.id, "js-alice")
    ]

    alice.receive(request)
    events = alice.events()
    received = [e["detail"] for e in events if e["type"].endswith("repair:request-received")]
    assert received == [{"messageIds": [first.id], "fromSenderId": "py-bob"}]
    # Dispatched as "RepairResponseQueued" by 0.0.8 (not "sds:repair:response-queued").
    queued = [e["detail"]["messageId"] for e in of_kind(events, "RepairResponseQueued")]
    assert queued == [first.id]
    rebroadcast = alice.sweep_repair()
    assert [r.id for r in rebroadcast] == [first.id]
    assert rebroadcast[0].data == first.data

    events = bob.receive(rebroadcast[0].data)
    assert delivered_ids(events) == [first.id, second.id]


def test_mixed_group_conversation_converges(waku: WakuProcess) -> None:
    """Two js and two sds participants each send two messages per round; every
    receiver gets each round's messages in its own random order (so messages often
    arrive before their dependencies). Everyone delivers every message, all four
    logs hold the same ids in the same (lamport, id) order, and every message ends
    acknowledged at its sender.
    """
    rnd = random.Random(11)
    js_peers = [waku.channel("js-ann"), waku.channel("js-ben")]
    py_peers = [PyPeer("py-cat", seed=21), PyPeer("py-dan", seed=22)]
    sent: list[tuple[str, Sent]] = []
    for round_no in range(30):
        batch: list[tuple[str, Sent]] = []
        for part in ("a", "b"):
            for js in js_peers:
                text = f"{js.sender} round {round_no}{part}".encode()
                batch.append((js.sender, js.send(text)))
            for py in py_peers:
                text = f"{py.sender} round {round_no}{part}".encode()
                batch.append((py.sender, py.send(text)))
        for js in js_peers:
            for sender, s in rnd.sample(batch, len(batch)):
                if sender != js.sender:
                    js.receive(s.data)
            js.sweep_incoming()
        for py in py_peers:
            for sender, s in rnd.sample(batch, len(batch)):
                if sender != py.sender:
                    py.receive(s.data)
        sent += batch

    # A last sync round so the final messages are acknowledged too.
    syncs = [s for js in js_peers if (s := js.sync()) is not None]
    for py in py_peers:
        ds = py.run_timers(
            lambda ds: any(d.kind == "sync" for d in ds),
            horizon_ms=sds.Config().sync_interval_ms * 2,
        )
        syncs += [Sent(d.message_id, d.data) for d in ds if d.kind == "sync"]
    for s in syncs:
        sender = sds.decode(s.data).sender_id
        for js in js_peers:
            if js.sender != sender:
                js.receive(s.data)
        for py in py_peers:
            if py.sender != sender:
                py.receive(s.data)

    # The log order both implementations use: (lamport, message id).
    expected = [s.id for _, s in sorted(sent, key=lambda p: (p[1].lamport, p[1].id))]
    assert len(set(expected)) == len(sent)
    for js in js_peers:
        assert js.history() == expected, js.sender
        assert js.incoming() == []
        assert js.outgoing() == [], js.sender
    for py in py_peers:
        own = {s.id for sender, s in sent if sender == py.sender}
        others = [i for i in expected if i not in own]
        got = [e.message_id for e in of_type(py.all_events, sds.MessageDelivered)]
        assert sorted(got) == sorted(others), py.sender
        assert py.ch.log_ids() == expected, py.sender
        assert len(got) == len(set(got)), "delivered twice"
        assert set(acked_ids(py.all_events)) == own, py.sender
    # The shuffles did make messages arrive before their dependencies.
    assert all(of_type(py.all_events, sds.MessagesMissing) for py in py_peers)


VERIFYING = sds.Config.waku().with_changes(verify_message_ids=True)


def test_js_messages_and_js_rebroadcasts_of_sds_messages_pass_id_verification(
    waku: WakuProcess,
) -> None:
    """Nodes verify ids (``sds.ids``): js-waku's ids are sha256(content), ours carry
    their nonce inside the id, so whatever js keeps of an sds message (its decoded
    fields) is enough: js's rebroadcast of an sds message, answering a repair
    request, verifies at a verifying sds peer."""
    bob = PyPeer("py-bob")
    carol = waku.channel("js-carol", **JS_IMMEDIATE_REPAIR)
    dan = PyPeer("py-dan", config=VERIFYING, seed=3)
    first = bob.send(b"first")
    second = bob.send(b"second")
    bob.drain()
    carol.receive(first.data)
    assert [e["detail"] for e in carol.events("message-delivered")] == [first.id]

    # dan only got `second`: he asks for `first`; js-carol answers with her copy
    events = dan.receive(second.data)
    assert [e.message_id for e in of_type(events, sds.MessagesMissing)] == [second.id]

    def carries_request(ds: list[sds.Datagram]) -> bool:
        return any(sds.decode(d.data).repair_request for d in ds)

    datagrams = dan.run_timers(carries_request, horizon_ms=VERIFYING.repair_t_max_ms + 1_000)
    request = next(d.data for d in datagrams if sds.decode(d.data).repair_request)
    carol.receive(request)
    rebroadcast = carol.sweep_repair()
    assert [r.id for r in rebroadcast] == [first.id]
    assert sds.id_form(first.id, CHANNEL, "py-bob", first.lamport, b"first") == "sdschat"
    events = dan.receive(rebroadcast[0].data)
    assert delivered_ids(events) == [first.id, second.id]

    # js-made content messages verify as js-waku ids
    js = carol.send(b"from js")
    events = dan.receive(js.data)
    assert delivered_ids(events) == [js.id]
    drops = [e.reason for e in of_type(dan.all_events, sds.MessageDropped)]
    assert sds.DropReason.UNVERIFIABLE_ID not in drops


# --------------------------------------------------------------------------- other sizes


def test_default_profile_and_js_waku_which_direction_delivers(waku: WakuProcess) -> None:
    """sdschat's default sizes (a 1,880-byte filter) against @waku/sds 0.0.8 (it expects
    18,752 bytes), recorded in both directions (docs/profiles.md):

    * js -> sds delivers: sds ignores the js filter for acknowledgements and counts it
      (``bad_filter``); js's causal history still acknowledges our messages;
    * sds -> js does NOT deliver: MessageChannel decodes the message, reads its causal
      history (and acknowledges its own messages named there), then throws a
      RangeError in reviewAckStatus reading our filter, and never delivers it.

    Hence a channel shared with js-waku peers must use ``sds.Config.waku()``.
    """
    js = waku.channel("js-old")
    py = PyPeer("py-new", sds.Config())
    assert len(sds.decode(py.send(b"warm-up").data).bloom_filter or b"") != 18_752
    py.drain()

    theirs = js.send(b"from js-waku")
    evs = py.receive(theirs.data)
    assert delivered_ids(evs) == [theirs.id]
    assert [e.reason for e in of_type(evs, sds.MessageDropped)] == [sds.DropReason.BAD_FILTER]

    ours = py.send(b"reply with sdschat's default sizes")
    py.drain()
    assert theirs.id in [e.message_id for e in sds.decode(ours.data).causal_history]
    r = js._call("receive", data_hex=ours.data.hex(), hint_hex=None)
    assert r["decoded"] and r["kind"] == "content"
    assert any("RangeError" in err for err in r["task_errors"])
    events = js.events()
    assert [e["detail"] for e in of_kind(events, "message-acknowledged")] == [theirs.id]
    assert of_kind(events, "message-delivered") == []
    assert ours.id not in js.history()

    # the same exchange on the waku profile delivers both ways
    old = PyPeer("py-waku", sds.Config.waku(), seed=7)
    js2 = waku.channel("js-two")
    mine = old.send(b"on js-waku's sizes")
    js2.receive(mine.data)
    assert [e["detail"] for e in js2.events("message-delivered")] == [mine.id]
