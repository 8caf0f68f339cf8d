"""Behind a reverse proxy: ``--trusted-proxy`` makes the per-address limit and the logs use
``X-Forwarded-For``, only for connections from a trusted proxy (real websockets clients on
127.0.0.1 sending the header; the relay in-process and as a real ``sdschat relay``)."""

from __future__ import annotations

import ipaddress
import subprocess
from pathlib import Path

import pytest
from net_helpers import Peer, channel, run, start_relay
from websockets.exceptions import ConnectionClosed

from net.forwarded import client_address, parse_networks
from net.relay_config import RelayConfig
from tests.procs import ROOT, Cluster, T, running, sdschat

TOPIC = channel("proxy").topic
PROXY = parse_networks(["127.0.0.0/8", "10.0.0.0/8"])


def test_the_rightmost_untrusted_address_is_the_client() -> None:
    # the proxy (127.0.0.1) appended the address it saw: 203.0.113.5
    assert client_address("127.0.0.1", ["203.0.113.5"], PROXY) == ("203.0.113.5", True)
    # what the client wrote itself (left of it) is not believed
    assert client_address("127.0.0.1", ["198.51.100.7, 203.0.113.5"], PROXY) == (
        "203.0.113.5",
        True,
    )
    # a chain of trusted proxies is walked through; several header lines are one list
    assert client_address("127.0.0.1", ["198.51.100.7, 203.0.113.5", "10.1.2.3"], PROXY) == (
        "203.0.113.5",
        True,
    )
    # ports, brackets and IPv4-mapped addresses
    assert client_address("::ffff:127.0.0.1", ["[2001:db8::1]:443"], PROXY) == (
        "2001:db8::1",
        True,
    )
    assert client_address("127.0.0.1", ["203.0.113.5:5555"], PROXY) == ("203.0.113.5", True)


def test_the_header_is_ignored_unless_the_peer_is_a_trusted_proxy() -> None:
    assert client_address("192.0.2.9", ["203.0.113.5"], PROXY) == ("192.0.2.9", False)
    assert client_address("127.0.0.1", ["203.0.113.5"], ()) == ("127.0.0.1", False)
    assert client_address("127.0.0.1", [], PROXY) == ("127.0.0.1", False)
    # garbage stops the walk at the last address a trusted proxy wrote
    assert client_address("127.0.0.1", ["bogus, 10.0.0.8"], PROXY) == ("10.0.0.8", True)
    assert client_address("127.0.0.1", ["nonsense"], PROXY) == ("127.0.0.1", False)


def test_a_trusted_proxy_must_be_an_address_or_network() -> None:
    with pytest.raises(ValueError, match="--trusted-proxy must be an IP address or network"):
        RelayConfig(trusted_proxies=("proxy.example.org",))
    assert RelayConfig(trusted_proxies=("10.0.0.0/8", "::1")).trusted_proxies[1] == "::1"
    assert parse_networks(["10.1.2.3/8"]) == (ipaddress.ip_network("10.0.0.0/8"),)


async def _served(url: str, forwarded_for: str | None) -> bool:
    """Open a websocket (with that X-Forwarded-For) and say whether the relay serves it."""
    headers = {"X-Forwarded-For": forwarded_for} if forwarded_for is not None else None
    peer = await Peer.open(url, additional_headers=headers)
    try:
        await peer.subscribe([TOPIC])
    except ConnectionClosed as exc:
        assert exc.rcvd is not None and exc.rcvd.code == 1013, exc
        return False
    return True


def test_per_address_limit_counts_clients_behind_a_trusted_proxy() -> None:
    async def main() -> None:
        server, log = await start_relay(max_clients_per_ip=2, trusted_proxies=("127.0.0.1",))
        try:
            url = server.url
            assert await _served(url, "203.0.113.5")
            assert await _served(url, "203.0.113.5")
            assert not await _served(url, "203.0.113.5")  # its 3rd
            # prepending an address of one's choice does not escape the limit
            assert not await _served(url, "198.51.100.7, 203.0.113.5")
            # other clients through the same proxy: 4 connections from 127.0.0.1 served
            assert await _served(url, "198.51.100.7")
            assert await _served(url, "192.0.2.8")
            assert server.connection_count == 4 and server.stats.rejected_per_ip == 2
            opened = [r["peer"] for r in log.records if r["event"] == "connection_opened"]
            assert opened[0].startswith("203.0.113.5 via 127.0.0.1:")
            assert opened[2].startswith("198.51.100.7 via 127.0.0.1:")
            rejected = [r for r in log.records if r["event"] == "connection_rejected"]
            assert rejected[0]["peer"].startswith("203.0.113.5 via 127.0.0.1:")
        finally:
            await server.close()

    run(main())


def test_the_header_from_an_untrusted_peer_changes_nothing() -> None:
    async def main() -> None:
        # only 127.0.0.2 is a proxy; these clients come from 127.0.0.1
        server, log = await start_relay(max_clients_per_ip=2, trusted_proxies=("127.0.0.2",))
        try:
            url = server.url
            assert await _served(url, "203.0.113.5")
            assert await _served(url, "198.51.100.7")
            assert not await _served(url, "192.0.2.1")  # all three are 127.0.0.1
            opened = [r["peer"] for r in log.records if r["event"] == "connection_opened"]
            assert all(p.startswith("127.0.0.1:") and "via" not in p for p in opened), opened
        finally:
            await server.close()

    run(main())


def test_sdschat_relay_takes_trusted_proxy_flags(tmp_path: Path) -> None:
    """The real command: flags parsed, repeated, logged; a bad one is a usage error."""
    bad = subprocess.run(
        sdschat("relay", "--port", "0", "--trusted-proxy", "not-an-address"),
        cwd=ROOT, capture_output=True, text=True, timeout=T(30), check=False,
    )
    assert bad.returncode == 2
    assert bad.stderr.strip() == (
        "sdschat relay: --trusted-proxy must be an IP address or network (10.0.0.0/8, ::1), "
        "got 'not-an-address'"
    )
    with running(Cluster(tmp_path)) as c:
        relay = c.start(
            sdschat("relay", "--port", "0", "--trusted-proxy", "127.0.0.1",
                    "--trusted-proxy", "10.0.0.0/8"),
            "relay", stdin=False,
        )
        assert relay.wait_log("relay_listening")["trusted_proxies"] == ["127.0.0.1", "10.0.0.0/8"]
