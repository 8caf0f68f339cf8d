"""The link protocol (app/members/link.py) over a real relay process on loopback: two
websocket clients run the two sides on the code's rendezvous topic while a tap records
every envelope the relay carries, as a relay that keeps everything would."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from e2e_helpers import T, cluster

from app.members.devices import PersonLog, decode_entry, make_genesis, new_recovery
from app.members.invites import unwrap, wrap
from app.members.link import (
    LINK_TTL_MS,
    LinkCode,
    LinkJoin,
    LinkOffer,
    LinkState,
    link_topic,
    new_link_code,
)
from net.identity import Identity
from net.relay_frames import decode_frame, encode_ping, encode_publish, encode_subscribe
from tests.procs import tap


def _side(url: str, side: LinkOffer | LinkJoin, topic: bytes, ready: threading.Barrier) -> None:
    """One device: subscribe, wait until the relay has the subscription (a pong), then
    run the side until it is done or failed (bounded)."""
    from websockets.sync.client import connect

    with connect(url, max_size=None, proxy=None, ping_interval=None) as ws:
        ws.send(encode_subscribe([topic]))
        ws.send(encode_ping(7))
        while decode_frame(bytes(ws.recv(T(10)))).WhichOneof("body") != "pong":  # bounded
            pass
        ready.wait(T(20))
        for frame in side.start():
            ws.send(encode_publish(wrap(topic, frame)))
        deadline = time.monotonic() + T(30)
        while side.state not in (LinkState.DONE, LinkState.FAILED):  # bounded by deadline
            left = deadline - time.monotonic()
            if left <= 0:
                return
            try:
                raw = ws.recv(left)
            except TimeoutError:
                return
            frame = decode_frame(bytes(raw))
            if frame.WhichOneof("body") != "deliver":
                continue
            got = unwrap(bytes(frame.deliver.envelope))
            if got is None or got[0] != topic:
                continue
            for out in side.receive(got[1], int(time.time() * 1000)):
                ws.send(encode_publish(wrap(topic, out)))


def _link(url: str, offer: LinkOffer, join: LinkJoin, topic: bytes) -> None:
    ready = threading.Barrier(2)
    threads = [threading.Thread(target=_side, args=(url, s, topic, ready), daemon=True)
               for s in (offer, join)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join(T(60))


def _bob() -> tuple[Identity, PersonLog]:
    root = Identity.generate()
    log = PersonLog(root.public_key)
    e = decode_entry(make_genesis(root, new_recovery()[0].public_key, "desktop"))
    assert not isinstance(e, str)
    log.take(e)
    return root, log


def test_a_device_links_over_the_relay_which_learns_neither_code_nor_payload(
        tmp_path: Path) -> None:  # fmt: skip
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        root, log = _bob()
        laptop = Identity.generate()
        code = new_link_code()
        topic = link_topic(code.nameplate)
        now = int(time.time() * 1000)
        offer = LinkOffer(code, root, log, b"the channels and their sessions", now)
        join = LinkJoin(code, laptop, "laptop", now)
        with tap(url, topic) as relay_tap:
            _link(url, offer, join, topic)
            assert offer.state is LinkState.DONE, offer.error
            assert join.state is LinkState.DONE, join.error
            recorded = b"".join(relay_tap.since(0))
        assert offer.sas == join.sas and offer.add == join.add
        assert join.payload == b"the channels and their sessions"
        assert join.log is not None and join.log.is_device(laptop.public_key)
        assert recorded  # the relay carried the link
        for word in code.password.split("-"):
            assert word.encode() not in recorded
        assert b"the channels and their sessions" not in recorded


def test_a_wrong_code_over_the_relay_links_nothing_and_spends_the_code(tmp_path: Path) -> None:
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        root, log = _bob()
        code = new_link_code()
        topic = link_topic(code.nameplate)
        now = int(time.time() * 1000)
        offer = LinkOffer(code, root, log, b"secret", now)
        wrong = "abandon-ability" if code.password != "abandon-ability" else "zoo-zoo"
        guess = LinkJoin(LinkCode(code.nameplate, wrong), Identity.generate(), "x", now)
        _link(url, offer, guess, topic)
        assert offer.state is LinkState.FAILED and offer.error == "wrong_code"
        assert guess.state is LinkState.FAILED and guess.add is None and offer.add is None


def _run(coro: object, base: float = 60) -> None:
    import asyncio

    asyncio.run(asyncio.wait_for(coro, T(base)))  # type: ignore[arg-type]


def test_an_expired_a_reused_and_an_interrupted_code_link_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Through run_side over a real relay: an offer past its 10 minutes ends as expired;
    a code whose offer is gone gets no answer; a new device that stops after the key
    exchange leaves the old device's data directory as it was (offer_link writes
    nothing)."""
    import asyncio

    from app.members import link_relay, person_file
    from app.members.link_offer import offer_link
    from app.members.link_relay import LinkFailed, run_side

    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        root, log = _bob()
        code = new_link_code()
        stale = LinkOffer(code, root, log, b"", int(time.time() * 1000) - LINK_TTL_MS - 1)
        with pytest.raises(LinkFailed) as expired:
            _run(run_side(stale, [url]))
        assert expired.value.reason == "expired" and "10 minutes" in str(expired.value)
        reuse = LinkJoin(code, Identity.generate(), "laptop", int(time.time() * 1000))
        with pytest.raises(LinkFailed) as nobody:
            _run(run_side(reuse, [url], answer_s=2))
        assert nobody.value.reason == "no_answer" and reuse.add is None

        data_dir = tmp_path / "bob"
        data_dir.mkdir(mode=0o700)
        (data_dir / "identity.pem").write_bytes(root.to_pem())
        (data_dir / "identity.pem").chmod(0o600)
        before = sorted(p.name for p in data_dir.rglob("*"))
        monkeypatch.setattr(link_relay, "STEPS_S", 2.0)
        codes: list[LinkCode] = []

        async def interrupted() -> None:
            offer = asyncio.create_task(offer_link(data_dir, root, [url], on_code=codes.append))
            while not codes:  # bounded by the wait_for around it
                await asyncio.sleep(0.01)
            half = LinkJoin(codes[0], Identity.generate(), "laptop", int(time.time() * 1000))
            topic = link_topic(codes[0].nameplate)
            from websockets.asyncio.client import connect

            async with connect(url, proxy=None) as ws:
                await ws.send(encode_subscribe([topic]))
                # the code is shown before the old device's relay connection is up: wait
                # for its first frame on the topic (it is subscribed by then) and only
                # then send our half, once (a real new device repeats its own)
                while True:  # bounded by the wait_for around it
                    frame = decode_frame(bytes(await ws.recv()))
                    if frame.WhichOneof("body") == "deliver" and (
                            got := unwrap(bytes(frame.deliver.envelope))) is not None and (
                            got[0] == topic):  # fmt: skip
                        break
                await ws.send(encode_publish(wrap(topic, half.start()[0])))
                # it hears the old device's SPAKE2 message and confirmation, then stops
                with pytest.raises(LinkFailed) as stopped:
                    await offer
            assert stopped.value.reason == "timeout"

        _run(interrupted())
        assert sorted(p.name for p in data_dir.rglob("*")) == before
        assert person_file.load(data_dir) is None
