"""A scripted run of real channels whose saved states and outputs are kept as fixtures.

It proves that a ``ChannelState`` saved by an earlier commit loads and behaves the
same on this tree (tests/sds/test_saved_state.py), and that the channels behave
the same from scratch. Three channels of members, each in virtual time over a
lossy broadcast network of its own (seeded), exercise the whole core:

* ``scale``: 6 members of what stands for a 2,176-member channel
  (``repair_response_groups=18``), ids verified, 15% loss: stretched SDS-R
  windows, capped first requests, copies of answers, carrying (``to_carry``,
  carried copies given to ``receive`` or, when held, to ``note_carried``), sync
  suppression and deferral, tail naming; broadcasts parsed once for all
  receivers (``receive_parsed`` of a ``SharedMessage``);
* ``plain``: 4 members with small windows and caps (log window 40, incoming
  buffer 6, outgoing buffer 8, missing 25, cache 8, 3 resends, a lost timeout of
  8 s), 25% loss, one of them with a filter of another size; one member
  disconnected for a while (``set_connected``), crafted hostile messages (garbage,
  wrong channel, ids too long, clocks ahead and out of range, histories too long,
  too many repair requests, invented ids past the sender budget, conflicts, a
  carried sync), storage answering ``MessagesMissing`` (``mark_dependencies_met``)
  and ``RepairDataNeeded`` (``supply_repair_data``), ephemeral messages,
  ``ask_sync``;
* ``fixed``: 3 members with the waku profile's switches (fixed causal history
  and SDS-R windows, no suppression, one answer copy, no carrying) and fast
  timings, with the default filter size (js-waku's 18 KB filter would make the
  fixture megabytes; tests/interop checks those bytes), 20% loss.

Phase A runs each network from empty channels for 30 virtual seconds, then every
member's state is exported. Phase B restores every member from those bytes after a
3 s restart gap (``Channel.restore`` with ``now_ms``; one member without) and runs
30 s more with new lines. Every call into a channel is one step of the trace; its
digest chains (SHA-256) the call, its return value, the events (``repr``), the
datagrams, the timer and ``stats()`` after it, and, every 64 steps, each member's
log, buffers, filter and exported state: the first step whose digest differs says
where two trees part.

Run with a fixed ``PYTHONHASHSEED`` (set iteration orders reach the exported
state); :func:`main` re-runs itself with ``PYTHONHASHSEED=0``. To regenerate the
fixture from the commit it was saved at::

    git worktree add /tmp/sds-41573be 41573be
    python tests/sds/saved_state_scenario.py --sds /tmp/sds-41573be \\
        --write tests/sds/fixtures/saved_41573be

``--sds ROOT`` imports ``sds`` from that tree (this file needs only the public
API). Without ``--write`` it prints the digests and what the run exercised.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import heapq
import json
import os
import random
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import sds

CHANNEL = "saved-state"
PHASE_MS = 30_000
RESTART_GAP_MS = 3_000
START_MS = 1_700_000_000_000
CHECK_EVERY = 64
HASH_SEED = "0"
#: the tree this file is in (whose ``sds`` it imports unless told another)
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Member:
    name: str
    config: sds.Config
    ch: sds.Channel
    #: what this member's application stored: id -> SDS bytes (sent and delivered)
    storage: dict[str, bytes] = field(default_factory=dict)
    timer: int | None = None
    connected: bool = True


@dataclass
class Group:
    """One channel's members on one lossy broadcast network."""

    name: str
    loss: float
    shared_parse: bool
    members: list[Member]
    rng: random.Random
    #: (time, seq, kind, member index, payload)
    queue: list[tuple[int, int, str, int, Any]] = field(default_factory=list)
    seq: int = 0

    def push(self, t: int, kind: str, who: int, payload: Any = None) -> None:
        self.seq += 1
        heapq.heappush(self.queue, (t, self.seq, kind, who, payload))


class Trace:
    """The chained digest of every step, and counts of what the run exercised."""

    def __init__(self) -> None:
        self.digest = hashlib.sha256()
        self.steps: list[str] = []
        self.labels: list[str] = []
        self.seen: Counter[str] = Counter()

    def step(self, label: str, parts: list[Any]) -> None:
        h = self.digest
        h.update(label.encode())
        for p in parts:
            h.update(b"\x00")
            h.update(p if isinstance(p, bytes) else repr(p).encode())
        self.steps.append(h.copy().hexdigest()[:8])
        self.labels.append(label)


def configs(sds_mod: Any) -> dict[str, list[Any]]:
    cfg = sds_mod.Config
    # rules added after the fixture's commit, off: the rest of the core must behave as it
    # did (each rule has tests of its own)
    later = {f: False for f in ("repair_cheapest_namers_first",)
             if f in {x.name for x in dataclasses.fields(cfg)}}  # fmt: skip
    scale = cfg.fast(repair_response_groups=18, verify_message_ids=True, **later)
    plain = cfg.fast(
        log_window=40, incoming_buffer_cap=6, outgoing_buffer_cap=8, max_missing=25,
        repair_cache_size=8, max_resend_attempts=3, lost_timeout_ms=8_000,
        max_missing_per_sender=20, max_history_received=60, max_repair_requests_received=60,
        max_clock_skew_ms=60_000, **later,
    )
    default = cfg()
    fixed = cfg.waku(bloom_capacity=default.bloom_capacity, **later).with_fast_timings()
    return {
        "scale": [scale] * 6,
        "plain": [plain, plain, plain, plain.with_changes(bloom_capacity=500)],
        "fixed": [fixed] * 3,
    }


LOSS = {"scale": 0.15, "plain": 0.25, "fixed": 0.2}


def _seed(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "big")


class Scenario:
    def __init__(self, sds_mod: Any) -> None:
        self.sds = sds_mod
        self.trace = Trace()
        self.groups: dict[str, Group] = {}

    # ------------------------------------------------------------------ steps

    def _after(self, g: Group, m: Member, label: str, now: int, ret: Any) -> None:
        """Record a call's outputs, act on its events as an application does, queue its
        datagrams and re-arm its timer."""
        s = self.sds
        ch = m.ch
        events = ch.events()
        grams = ch.datagrams_to_send()
        timer = ch.get_timer()
        parts: list[Any] = [ret, [repr(e) for e in events],
                            [(d.kind, d.message_id, d.data) for d in grams], timer, ch.stats()]
        self.trace.step(f"{g.name}/{m.name} {label} @{now - START_MS}", parts)
        self.trace.seen[f"call:{label.split()[0]}"] += 1
        for e in events:
            self.trace.seen[type(e).__name__] += 1
            if isinstance(e, s.MessageDropped):
                self.trace.seen[f"drop:{e.reason}"] += 1
            if isinstance(e, s.MessageSent | s.MessageDelivered):
                m.storage[e.message_id] = e.data
        # the application's answers, after this call's events (as a node's round)
        for e in events:
            if isinstance(e, s.MessagesMissing):
                held = [x.message_id for x in e.missing if x.message_id in m.storage]
                if held:
                    g.push(now, "met", g.members.index(m), held)
            elif isinstance(e, s.RepairDataNeeded) and e.message_id in m.storage:
                g.push(now, "supply", g.members.index(m), e.message_id)
        for d in grams:
            self.trace.seen[f"datagram:{d.kind}"] += 1
            self._broadcast(g, m, now, d.data, [])
        m.timer = timer
        if timer is not None:
            g.push(max(timer, now), "timer", g.members.index(m), timer)
        if len(self.trace.steps) % CHECK_EVERY == 0:
            self._checkpoint()

    def _checkpoint(self) -> None:
        parts: list[Any] = []
        for g in self.groups.values():
            for m in g.members:
                ch = m.ch
                parts += [ch.log_ids(), ch.outgoing_ids(), ch.incoming_ids(), ch.missing_ids(),
                          ch.bloom_filter_bytes(), ch.lamport, ch.connected, ch.log_size,
                          ch.export_state().to_bytes()]
        self.trace.step("checkpoint", parts)

    def _broadcast(self, g: Group, src: Member, now: int, data: bytes,
                   carried: list[tuple[str, bytes]]) -> None:
        if not src.connected:
            return  # its link is down: nothing leaves
        shared = None
        if g.shared_parse:
            shared = self.sds.message.SharedMessage(self.sds.message.parse_pb(data))
        for i, m in enumerate(g.members):
            if m is src:
                continue
            if g.rng.random() < g.loss:
                continue
            delay = 20 + int(g.rng.random() * 80)
            g.push(now + delay, "deliver", i, (data, shared, carried))

    # -------------------------------------------------------------- handlers

    def _deliver(self, g: Group, m: Member, now: int, payload: Any) -> None:
        data, shared, carried = payload
        if not m.connected:
            return  # the link is down: nothing arrives
        ch = m.ch
        for mid, cdata in carried:
            if ch.holds(mid):
                ch.note_carried(mid, now)
                self._after(g, m, f"note_carried {mid[:8]}", now, None)
            else:
                ch.receive(cdata, now, None, carried=True)
                self._after(g, m, f"receive_carried {mid[:8]}", now, None)
        hint = hashlib.sha256(data).digest()[:8]
        if shared is not None:
            ch.receive_parsed(shared, data, now, hint)
        else:
            ch.receive(data, now, hint)
        self._after(g, m, "receive", now, None)

    def _send(self, g: Group, m: Member, now: int, i: int) -> None:
        ch = m.ch
        if i % 9 == 4:
            data = ch.send_ephemeral(b"typing %d" % i, now)
            self._after(g, m, "send_ephemeral", now, data)
            self._broadcast(g, m, now, data, [])
            return
        data = ch.send(b"%s line %d" % (m.name.encode(), i), now)
        self._after(g, m, "send", now, data)
        carried = ch.to_carry(now)
        self.trace.step(f"{g.name}/{m.name} to_carry", [carried])
        self.trace.seen["carried"] += len(carried)
        self._broadcast(g, m, now, data, carried)

    def _run(self, g: Group, until: int, lines_from: int) -> None:
        sends = 0
        while g.queue and g.queue[0][0] <= until:
            t, _, kind, who, payload = heapq.heappop(g.queue)
            m = g.members[who]
            if kind == "timer":
                if m.timer != payload:
                    continue  # re-armed since
                m.ch.handle_timer(t)
                self._after(g, m, "timer", t, None)
            elif kind == "deliver":
                self._deliver(g, m, t, payload)
            elif kind == "send":
                self._send(g, m, t, lines_from + sends)
                sends += 1
            elif kind == "met":
                m.ch.mark_dependencies_met(payload, t)
                self._after(g, m, f"met {len(payload)}", t, None)
            elif kind == "supply":
                m.ch.supply_repair_data(payload, m.storage[payload], t)
                self._after(g, m, "supply", t, None)
            elif kind == "connect":
                m.connected = payload
                m.ch.set_connected(payload, t)
                self._after(g, m, f"connected {payload}", t, None)
            elif kind == "ask_sync":
                m.ch.ask_sync()
                self._after(g, m, "ask_sync", t, None)
            elif kind == "hostile":
                data = self._hostile(g, m, t, payload)
                m.ch.receive(data, t, None, carried=payload == "carried_sync")
                self._after(g, m, f"hostile {payload}", t, None)
        g.queue.clear()  # what was in flight is lost (the restart, or the end)

    # -------------------------------------------------------------- schedule

    def _schedule(self, g: Group, start: int, phase: str) -> None:
        rng = random.Random(_seed("lines", g.name, phase))
        for i in range(len(g.members)):
            t = start + int(rng.random() * 800)
            while t < start + PHASE_MS - 4_000:
                g.push(t, "send", i)
                t += 600 + int(rng.random() * 2_400)
        if g.name == "plain":
            off = 1 if phase == "A" else 2
            g.push(start + 9_000, "connect", off, False)
            g.push(start + 16_000, "connect", off, True)
            g.push(start + 21_000, "ask_sync", 0)
            for k, what in enumerate(HOSTILE):
                g.push(start + 3_000 + 700 * k, "hostile", k % 3, what)
        if g.name == "scale":
            g.push(start + 12_000, "ask_sync", 2)
            g.push(start + 5_000, "hostile", 1, "unverifiable")

    def _hostile(self, g: Group, m: Member, now: int, what: str) -> bytes:
        s = self.sds
        ids = m.ch.log_ids()
        known = ids[-1] if ids else "nothing"

        def msg(mid: str = "m" * 64, sender: str = "mallory", lamport: int | None = now,
                history: tuple[str, ...] = (), content: bytes | None = b"hi",
                channel: str = CHANNEL, repair: tuple[str, ...] = (),
                bloom: bytes | None = None) -> bytes:
            return bytes(s.encode(s.Message(
                sender_id=sender, message_id=mid, channel_id=channel,
                lamport_timestamp=lamport,
                causal_history=tuple(s.HistoryEntry(h) for h in history),
                content=content, bloom_filter=bloom,
                repair_request=tuple(s.HistoryEntry(r, None, "nobody") for r in repair),
            )))

        if what == "garbage":
            return b"\xff\x01not protobuf"
        if what == "wrong_channel":
            return msg(channel="elsewhere")
        if what == "missing_id":
            return msg(mid="")
        if what == "long_id":
            return msg(mid="x" * 300)
        if what == "ephemeral":
            return msg(mid="e" * 64, lamport=None)
        if what == "invalid_kind":
            return msg(lamport=None, content=None)
        if what == "lamport_range":
            return msg(lamport=(1 << 62) + 1)
        if what == "clock_ahead":
            return msg(lamport=now + 3_600_000)
        if what == "long_history":
            return msg(history=tuple(f"h{i}" for i in range(61)))
        if what == "many_requests":
            return msg(content=None, repair=tuple(f"r{i}" for i in range(61)))
        if what.startswith("invented"):
            return msg(mid=f"inv-{what}", history=tuple(f"{what}-{i}" for i in range(15)))
        if what == "saturated":
            return msg(mid="s" * 64, history=tuple(ids[-2:]),
                       bloom=b"\xff" * len(m.ch.bloom_filter_bytes()))
        if what == "unverifiable":
            return msg(history=tuple(ids[-2:]))
        if what == "conflict":
            return msg(mid=known, sender="mallory", history=())
        if what == "carried_sync":
            return msg(content=None)
        if what == "known_history":
            return msg(mid="k" * 64, history=tuple(ids[-3:]))
        if what == "asks":
            return msg(mid="a" * 64, content=None, repair=(known, "never-was"))
        raise ValueError(what)

    # ----------------------------------------------------------------- phases

    def build(self, phase: str) -> None:
        """The groups, their members with empty channels at ``START_MS``."""
        s = self.sds
        for name, cfgs in configs(s).items():
            members = []
            for i, cfg in enumerate(cfgs):
                mname = f"{name}{i}"
                rng = random.Random(_seed("member", mname, phase))
                members.append(Member(mname, cfg, s.Channel(CHANNEL, mname, cfg, START_MS, rng)))
            self.groups[name] = Group(name, LOSS[name], name == "scale", members,
                                      random.Random(_seed("net", name, phase)))

    def phase_a(self) -> dict[str, bytes]:
        """From empty channels; returns every member's exported state."""
        self.build("A")
        for g in self.groups.values():
            for i, m in enumerate(g.members):
                m.timer = m.ch.get_timer()
                if m.timer is not None:
                    g.push(m.timer, "timer", i, m.timer)
            self._schedule(g, START_MS, "A")
        for g in self.groups.values():
            self._run(g, START_MS + PHASE_MS, 0)
        return {m.name: m.ch.export_state().to_bytes()
                for g in self.groups.values() for m in g.members}

    def phase_b(self, states: dict[str, bytes]) -> dict[str, bytes]:
        """Every member restored from ``states`` after the restart gap, then 30 s more;
        returns every member's exported state at the end."""
        s = self.sds
        self.trace = Trace()
        start = START_MS + PHASE_MS + RESTART_GAP_MS
        for g in self.groups.values():
            g.rng = random.Random(_seed("net", g.name, "B"))
            g.seq = 0
            for m in g.members:
                state = s.ChannelState.from_bytes(states[m.name])
                rng = random.Random(_seed("member", m.name, "B"))
                at = None if m.name == "plain2" else start
                m.ch = s.Channel.restore(state, m.config, rng, at)
                m.connected = True
                self._after(g, m, "restore", start, None)
            self._schedule(g, start, "B")
        for g in self.groups.values():
            self._run(g, start + PHASE_MS, 1_000)
        return {m.name: m.ch.export_state().to_bytes()
                for g in self.groups.values() for m in g.members}


#: crafted messages given to the ``plain`` members, one every 0.7 s, round robin over
#: three of them (the two invented-id ones reach the same member)
HOSTILE = ("garbage", "wrong_channel", "missing_id", "long_id", "ephemeral", "invalid_kind",
           "lamport_range", "clock_ahead", "long_history", "many_requests", "invented1",
           "saturated", "conflict", "invented2", "carried_sync", "known_history", "asks")


def _import_sds(sds_root: str | None) -> Any:
    if sds_root is not None:
        sys.path.insert(0, sds_root)
    import sds as sds_mod
    import sds.message  # SharedMessage, parse_pb

    return sds_mod


def run(sds_root: str | None, saved_dir: str | None = None) -> dict[str, Any]:
    """Phase A from empty channels, then phase B from saved states: phase A's own, or
    with ``saved_dir`` those in that directory (a fixture's ``saved/``: written by
    another tree). The members' storage (an application's, not the core's) carries
    over from phase A."""
    sds_mod = _import_sds(sds_root)
    sc = Scenario(sds_mod)
    saved = sc.phase_a()
    trace_a = sc.trace
    exported = saved
    if saved_dir is not None:
        saved = {p.stem: p.read_bytes() for p in sorted(Path(saved_dir).glob("*.json"))}
    final = sc.phase_b(saved)
    return {
        "sds": str(Path(sds_mod.__file__).resolve().parent),
        "steps_a": trace_a.steps,
        "labels_a": trace_a.labels,
        "steps_b": sc.trace.steps,
        "labels_b": sc.trace.labels,
        "saved": {k: v.decode() for k, v in exported.items()},
        "final": {k: v.decode() for k, v in final.items()},
        "seen": dict(sorted((trace_a.seen + sc.trace.seen).items())),
    }


def _child(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sds", default=None)
    ap.add_argument("--saved", default=None, help="restore phase B from these states")
    a = ap.parse_args(argv)
    sys.stdout.write(json.dumps(run(a.sds, a.saved)))
    return 0


def digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def in_child(args: list[str], cwd: Path | None = None) -> dict[str, Any]:
    """Run this file with ``args`` in a child with ``PYTHONHASHSEED`` fixed; its JSON."""
    env = dict(os.environ, PYTHONHASHSEED=HASH_SEED)
    res = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", *args],
                         capture_output=True, text=True, env=env, cwd=cwd, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"scenario failed:\n{res.stderr[-4000:]}")
    out: dict[str, Any] = json.loads(res.stdout)
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return _child(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sds", default=None, help="import sds from this tree")
    ap.add_argument("--write", default=None, help="write the fixture into this directory")
    a = ap.parse_args(argv)
    r = in_child(["--sds", str(Path(a.sds).resolve() if a.sds else ROOT)])
    print(f"sds from {r['sds']}: {len(r['steps_a'])} steps in phase A, last {r['steps_a'][-1]}; "
          f"{len(r['steps_b'])} in phase B, last {r['steps_b'][-1]}")
    print("exercised:", ", ".join(f"{k} {v}" for k, v in r["seen"].items()))
    if a.write:
        out = Path(a.write)
        (out / "saved").mkdir(parents=True, exist_ok=True)
        for name, raw in r["saved"].items():
            (out / "saved" / f"{name}.json").write_text(raw)
        rev = subprocess.run(["git", "-C", r["sds"], "rev-parse", "HEAD"], capture_output=True,
                             text=True, check=False).stdout.strip()
        meta = {"commit": rev, "hash_seed": HASH_SEED, "seen": r["seen"],
                "final_sha256": {k: digest(v) for k, v in r["final"].items()},
                "steps_a": " ".join(r["steps_a"]), "steps_b": " ".join(r["steps_b"])}
        (out / "trace.json").write_text(json.dumps(meta, indent=1) + "\n")
        again = in_child(["--sds", str(Path(r["sds"]).parent), "--saved", str(out / "saved")])
        if again["steps_b"] != r["steps_b"] or again["final"] != r["final"]:
            raise SystemExit("phase B from the written states differs from the run's")
        print(f"wrote {out} (phase B from its saved/ alone: the same)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
