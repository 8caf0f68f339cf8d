"""docs/deploy.md tells operators what to monitor in the relay's (and store's) JSON logs:
every event and field it names must exist in real log lines. A real ``sdschat relay``
(with TLS, so that SIGHUP reloads) and a real ``sdschat store`` are driven through each
documented event on 127.0.0.1; the doc's tables are parsed, not copied here."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import socket
import ssl
import subprocess
from pathlib import Path
from typing import Any

from net_helpers import T, channel
from tls_certs import issue, make_ca
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from net.relay_frames import encode_subscribe
from tests.procs import ROOT, Cluster, Proc, free_port, running, sdschat

DOC = ROOT / "docs" / "deploy.md"
SOURCES = "\n".join(p.read_text() for p in sorted((ROOT / "net").glob("*.py")))


def _section(title: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 3)
    return text[start : end if end != -1 else len(text)]


def _table(section: str, first_header: str) -> list[list[str]]:
    """The rows (cells) of the markdown table whose first header cell is ``first_header``."""
    rows: list[list[str]] = []
    inside = False
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|"):
            inside = False
            continue
        if cells[0] == first_header:
            inside = True
            continue
        if inside and not set(cells[0]) <= {"-", ":"}:
            rows.append(cells)
    assert rows, f"no table headed {first_header!r}"
    return rows


def _names(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def _keys(records: list[dict[str, Any]]) -> set[str]:
    return {k for r in records for k in r}


def _values(records: list[dict[str, Any]]) -> set[str]:
    return {str(v) for r in records for v in r.values()}


async def _client(port: int, source: str, ctx: ssl.SSLContext) -> ClientConnection:
    """A wss:// client from ``source`` (an address of 127.0.0.0/8, one host, or ``::1``,
    another) to the relay's address of the same family."""
    v6 = ":" in source
    sock = socket.socket(socket.AF_INET6 if v6 else socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.setblocking(False)
    target = ("::1" if v6 else "127.0.0.1", port)
    await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, target), T(5))
    return await asyncio.wait_for(
        connect(f"wss://127.0.0.1:{port}", sock=sock, ssl=ctx, server_hostname="127.0.0.1",
                proxy=None, compression=None),
        T(5),
    )


async def _refused(ws: ClientConnection) -> int:
    try:
        await asyncio.wait_for(ws.recv(), T(5))
    except ConnectionClosed as exc:
        assert exc.rcvd is not None
        return exc.rcvd.code
    raise AssertionError("not refused")


async def _connections(port: int, ctx: ssl.SSLContext, relay: Proc) -> None:
    """too many from one host, relay full, an idle client dropped, a silent one shed for
    a newcomer (limits: 3 in all, 2 per host, idle timeout 3 s; 127.0.0.0/8 is one host,
    ::1 another)."""
    topic = channel("monitor").topic
    idle = await _client(port, "127.0.0.1", ctx)  # never subscribes: dropped as idle
    first = await _client(port, "127.0.0.2", ctx)
    await first.send(encode_subscribe([topic]))
    assert await _refused(await _client(port, "127.0.0.3", ctx)) == 1013  # 3rd of the host
    other = await _client(port, "::1", ctx)
    await other.send(encode_subscribe([topic]))
    # full, the hosts within one connection of each other, all younger than the idle
    # timeout: refused
    assert await _refused(await _client(port, "::1", ctx)) == 1013
    await asyncio.to_thread(relay.wait_log, "connection_dropped", 20)
    third = await _client(port, "::1", ctx)  # takes the idle one's slot
    await third.send(encode_subscribe([topic]))
    await asyncio.sleep(1.0)  # "first" and "other" are now silent for longer than 3 s
    newcomer = await _client(port, "127.0.0.4", ctx)  # full: a silent one is shed for it
    await asyncio.to_thread(relay.wait_log, "connection_shed", 20)
    await newcomer.send(encode_subscribe([topic]))
    for ws in (idle, first, other, third, newcomer):
        await ws.close()


def _records(p: Proc, event: str) -> list[dict[str, Any]]:
    return [r for r in p.log_records() if r.get("event") == event]


def _wait_count(p: Proc, event: str, n: int) -> None:
    p.wait_for(lambda: len(_records(p, event)) >= n, 20, f"{n} {event} lines")


def test_every_event_and_field_the_deploy_guide_names_is_in_real_log_lines(
    tmp_path: Path,
) -> None:
    ca = make_ca(tmp_path)
    cert, key = issue(ca, tmp_path)
    ctx = ssl.create_default_context(cafile=str(ca.path))
    with running(Cluster(tmp_path)) as c:
        port = free_port()
        relay = c.start(
            sdschat("relay", "--host", "127.0.0.1,::1", "--port", str(port), "--certfile",
                    str(cert), "--keyfile", str(key), "--stats-interval", "0.5",
                    "--max-clients", "3", "--max-clients-per-ip", "2", "--idle-timeout", "3"),
            "relay", stdin=False,
        )
        assert int(relay.wait_log("relay_listening")["port"]) == port
        asyncio.run(_connections(port, ctx, relay))
        # a second relay on the same port cannot start
        busy = subprocess.run(sdschat("relay", "--port", str(port)), cwd=ROOT,
                              capture_output=True, text=True, timeout=T(30), check=False)
        assert busy.returncode == 1
        # SIGHUP: a renewed certificate, then one that does not load
        relay.signal(signal.SIGHUP)
        relay.wait_log("tls_reloaded")
        cert.write_text("not a certificate\n")
        relay.signal(signal.SIGHUP)
        relay.wait_log("tls_reload_failed")
        # the store, through this relay
        store = c.start(
            sdschat("store", "--data-dir", str(tmp_path / "store"), "--channel", "monitor",
                    "--relay", f"wss://127.0.0.1:{port}", "--cafile", str(ca.path),
                    "--listen", "127.0.0.1:0", "--stats-interval", "0.5"),
            "store", stdin=False,
        )
        store.wait_log("store_listening", 30)
        store.wait_log("relay_state", 30)
        _wait_count(store, "store_stats", 1)
        store_busy = subprocess.run(
            sdschat("store", "--data-dir", str(tmp_path / "store2"), "--channel", "monitor",
                    "--listen", f"127.0.0.1:{port}"),
            cwd=ROOT, capture_output=True, text=True, timeout=T(30), check=False,
        )
        assert store_busy.returncode == 1
        _wait_count(relay, "relay_stats", 2)
        for p in (store, relay):
            p.signal(signal.SIGTERM)
            assert p.wait(20) == 0, p.tail()
        records = relay.log_records() + _parse_lines(busy.stderr)
        store_records = store.log_records() + _parse_lines(store_busy.stderr)

    by_event: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_event.setdefault(str(r["event"]), []).append(r)
    assert all({"ts", "level", "event"} <= set(r) for r in records)

    section = _section("Monitoring: the relay's JSON logs")
    for event_cell, when, _watch in _table(section, "event"):
        for event in _names(event_cell):
            seen = by_event.get(event)
            assert seen, f"docs/deploy.md names {event}, not logged by the relay"
            for word in _names(when):
                # a field of the event, a value it took, a flag, or a name the relay uses
                assert (
                    word in _keys(seen)
                    or word in _values(seen)
                    or word.startswith("--")
                    or f'"{word}"' in SOURCES
                ), f"{event}: docs/deploy.md names {word!r}, not in its lines: {seen[:2]}"
    assert {r["reason"] for r in by_event["connection_rejected"]} == {
        "relay full", "too many from address"
    }
    assert [r["reason"] for r in by_event["connection_dropped"]] == ["idle", "shed"]

    stats = by_event["relay_stats"]
    assert any(r.get("final") for r in stats) and any(not r.get("final") for r in stats)
    for field_cell, meaning in _table(section, "field"):
        for field in _names(field_cell):
            assert all(field in r for r in stats), f"relay_stats has no {field!r}: {stats[-1]}"
        if _names(field_cell) == ["dropped"]:
            for reason in _names(meaning):
                assert f'"{reason}"' in SOURCES, f"no drop reason {reason!r} in net/"

    # "The store logs the same way: `store_listening`, `store_stats` (`received`, ...)"
    found = re.search(r"The store logs\s+the same way(.*?)\n\n", section + "\n\n", re.S)
    assert found is not None, "the store's sentence is gone from the monitoring section"
    store_text = found.group(1)
    store_events = {str(r["event"]) for r in store_records}
    store_stats = [r for r in store_records if r["event"] == "store_stats"]
    for name in _names(store_text):
        assert name in store_events or all(name in r for r in store_stats), (
            f"docs/deploy.md names {name!r} for the store: not an event or store_stats field"
        )


def _parse_lines(text: str) -> list[dict[str, Any]]:
    out = []
    for line in text.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out
