"""``sdschat relay`` as a real process: bound port in its log, serves, exits 0 on signals."""

from __future__ import annotations

import asyncio
import json
import random
import re
import signal
import sys
from pathlib import Path

import pytest
from net_helpers import Peer, T, channel, envelope, run

from net.relay_client import RelayClient

ROOT = Path(__file__).resolve().parents[2]


async def _read_until(stream: asyncio.StreamReader, pattern: str, lines: list[str]) -> str:
    """Read stderr lines (bounded count and time) until one matches ``pattern``."""
    for _ in range(1_000):
        raw = await asyncio.wait_for(stream.readline(), T(15))
        if not raw:
            raise AssertionError(f"relay exited before logging {pattern!r}: {lines}")
        line = raw.decode()
        lines.append(line)
        if re.search(pattern, line):
            return line
    raise AssertionError(f"no {pattern!r} in 1,000 lines")


@pytest.mark.parametrize(
    ("sig", "log_format"),
    [(signal.SIGTERM, "json"), (signal.SIGINT, "text")],
    ids=["SIGTERM-json", "SIGINT-text"],
)
def test_relay_process_serves_and_exits_cleanly(sig: signal.Signals, log_format: str) -> None:
    async def main() -> None:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "app.cli", "relay",
            "--host", "127.0.0.1", "--port", "0", "--log-format", log_format,
            "--stats-interval", "0",
            cwd=ROOT,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert proc.stderr is not None
        lines: list[str] = []
        try:
            line = await _read_until(proc.stderr, "relay_listening", lines)
            if log_format == "json":
                record = json.loads(line)
                assert set(record) >= {"ts", "level", "event", "port"}
                port = int(record["port"])
            else:
                match = re.search(r"\bport=(\d+)", line)
                assert match is not None
                port = int(match.group(1))
            url = f"ws://127.0.0.1:{port}"
            key = channel("proc")
            got: list[bytes] = []
            arrived = asyncio.Event()

            def on_envelope(env: bytes) -> None:
                got.append(env)
                arrived.set()

            client = RelayClient(url, [key.topic], on_envelope, rng=random.Random(0))
            client.start()
            assert await client.wait_connected(T(10))
            pub = await Peer.open(url)
            env = envelope(key=key)
            await pub.publish(env)
            await asyncio.wait_for(arrived.wait(), T(10))
            assert got == [env]

            proc.send_signal(sig)
            # the relay closes our connections with 1001 and exits 0
            rest = await asyncio.wait_for(proc.stderr.read(), T(15))
            assert await asyncio.wait_for(proc.wait(), T(15)) == 0
            await client.close()
            await pub.close()
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        text = "".join(lines) + rest.decode()
        if log_format == "json":
            records = [json.loads(x) for x in text.splitlines() if x.strip()]
            events = [r["event"] for r in records]
            assert events[0] == "relay_listening"
            assert "relay_shutdown" in events and events[-1] == "relay_stopped"
            stats = [r for r in records if r["event"] == "relay_stats"][-1]
            assert stats["final"] is True
            assert stats["published"] == 1 and stats["deliveries"] == 1
            shutdown = next(r for r in records if r["event"] == "relay_shutdown")
            assert shutdown["signal"] == sig.name
        else:
            assert "relay_stopped" in text and f"signal={sig.name}" in text

    run(main(), base_timeout=40)


def test_relay_process_reports_a_busy_port() -> None:
    async def main() -> None:
        import socket

        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen()
            port = busy.getsockname()[1]
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "app.cli", "relay", "--port", str(port),
                cwd=ROOT,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            try:
                _, err = await asyncio.wait_for(proc.communicate(), T(15))
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
        assert proc.returncode == 1
        record = json.loads(err.decode().strip().splitlines()[-1])
        assert record["event"] == "relay_start_failed" and record["level"] == "error"

    run(main(), base_timeout=30)


def test_sighup_stops_a_relay_without_tls() -> None:
    """SIGHUP reloads a TLS relay's certificate; a plain relay keeps its usual meaning
    (a closed terminal or tmux pane: `sdschat demo --stop`) and ends. It used to log
    tls_reload_ignored and keep running, and every demo stop left a relay behind."""

    async def main() -> None:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "app.cli", "relay",
            "--host", "127.0.0.1", "--port", "0", "--stats-interval", "0",
            cwd=ROOT,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            # as from a terminal: under nohup (SIGHUP ignored, inherited) it rightly stays
            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL),
        )  # fmt: skip
        assert proc.stderr is not None
        try:
            await _read_until(proc.stderr, "relay_listening", [])
            proc.send_signal(signal.SIGHUP)
            code = await asyncio.wait_for(proc.wait(), T(15))
            assert code == -signal.SIGHUP  # ended by the signal's default action
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
                raise AssertionError("the relay kept running after SIGHUP")

    run(main())
