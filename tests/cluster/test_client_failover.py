"""Clients with several relays: settings, failover order and backoff, in process."""

from __future__ import annotations

import argparse
import asyncio
import random
from pathlib import Path

import pytest
from net_helpers import T, run, start_relay

from app.launch.settings import add_join_arguments, settings_from_args
from net.relay_client import ConnectionState, RelayClient, StateChange
from net.urls import display_address
from tests.procs import free_port


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_join_arguments(p)
    return p.parse_args(argv)


def test_relay_flag_is_repeatable_and_config_takes_a_list(tmp_path: Path) -> None:
    s = settings_from_args(_parse(["room", "--relay", "ws://h:1", "--relay", "ws://h:2"]))
    assert s.relays == ("ws://h:1", "ws://h:2") and s.relay == "ws://h:1"
    cfg = tmp_path / "c.toml"
    cfg.write_text('relay = ["ws://a:1", "ws://b:2", "ws://c:3"]\n')
    s = settings_from_args(_parse(["room", "--config", str(cfg)]))
    assert s.relays == ("ws://a:1", "ws://b:2", "ws://c:3")
    s = settings_from_args(_parse(["room", "--config", str(cfg), "--relay", "ws://d:4"]))
    assert s.relays == ("ws://d:4",)  # flags win over the file
    cfg.write_text('relay = "ws://a:1"\n')
    assert settings_from_args(_parse(["room", "--config", str(cfg)])).relays == ("ws://a:1",)
    for text, message in [
        ("relay = []\n", "relay must be a string or list of strings, got []"),
        ('relay = ["ws://a:1", 5]\n', "relay must be a string or list of strings"),
        ('relay = ["ws://a:1", "http://b"]\n', "relay (config file) must be a ws://"),
    ]:
        cfg.write_text(text)
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")
                           .replace("[", r"\[").replace("]", r"\]")):
            settings_from_args(_parse(["room", "--config", str(cfg)]))
    with pytest.raises(ValueError, match="--relay 'ws://h:0': port 0"):
        settings_from_args(_parse(["room", "--relay", "ws://h:1", "--relay", "ws://h:0"]))


def test_fails_over_to_the_next_relay_and_back() -> None:
    async def main() -> None:
        r1, _ = await start_relay()
        r2, _ = await start_relay()
        dead = f"ws://127.0.0.1:{free_port()}"
        changes: list[StateChange] = []
        client = RelayClient(
            [dead, r1.url, r2.url], [b"t" * 16], lambda e: None, on_state=changes.append,
            backoff_base=0.05, backoff_max=0.4, rng=random.Random(1),
        )
        client.start()
        try:
            assert await client.wait_connected(T(5))
            assert client.url == r1.url  # the unreachable first one was skipped
            assert changes[-1].reason == f"connected to {display_address(r1.url)}"
            await r1.close()  # the relay goes away: the next one, quickly
            loop = asyncio.get_running_loop()
            lost = loop.time()
            async with asyncio.timeout(T(5)):
                while not (client.connected and client.url == r2.url):  # bounded
                    await asyncio.sleep(0.01)
            assert loop.time() - lost < T(2)
            await r2.close()  # now only unreachable relays: backoff grows per round
            async with asyncio.timeout(T(10)):
                while sum(c.state is ConnectionState.DISCONNECTED for c in changes) < 8:
                    await asyncio.sleep(0.02)
        finally:
            await client.close()
        waits = [c for c in changes if c.state is ConnectionState.DISCONNECTED]
        after = waits[-6:]  # attempts k..k+5 after r2 closed: ceilings per round of 3
        for c in after:
            assert c.retry_in is not None
            ceiling = min(0.4, 0.05 * 2 ** ((c.attempt - 1) // 3))
            assert ceiling / 2 <= c.retry_in <= ceiling, (c.attempt, c.retry_in)
        assert changes[-1].state is ConnectionState.CLOSED

    run(main(), base_timeout=30)


def test_single_url_behaves_as_before() -> None:
    async def main() -> None:
        r1, _ = await start_relay()
        changes: list[StateChange] = []
        client = RelayClient(r1.url, [b"t" * 16], lambda e: None, on_state=changes.append)
        client.start()
        try:
            assert await client.wait_connected(T(5))
            assert changes[-1].reason is None and client.urls == (r1.url,)
        finally:
            await client.close()
            await r1.close()

    run(main())
