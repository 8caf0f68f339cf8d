"""``sdschat relay --cluster`` refuses NATS without TLS or credentials (issue 26, item 7).

Nothing here connects anywhere: the refusal happens while the flags are read,
before the relay starts (the non-loopback addresses below are never dialled).
"""

from __future__ import annotations

import subprocess

import pytest

from net.relay_config import RelayConfig, insecure_nats_urls
from tests.procs import ROOT, T, sdschat

OPEN = "nats://192.0.2.10:4222"  # TEST-NET-1: documentation only, never dialled


def test_an_open_nats_url_is_refused_with_what_to_do() -> None:
    out = subprocess.run(
        sdschat("relay", "--port", "0", "--cluster", OPEN, "--cluster-timeout", "1"),
        cwd=ROOT, capture_output=True, text=True, timeout=T(30), check=False,
    )
    assert out.returncode == 2, out.stderr
    line = out.stderr.strip()
    assert "neither TLS nor credentials" in line and OPEN in line
    assert "--cluster-insecure" in line and "Traceback" not in out.stderr
    assert "relay_listening" not in out.stderr  # nothing started


def test_tls_credentials_loopback_or_the_explicit_flag_are_accepted() -> None:
    for url in ("tls://192.0.2.10:4222", "nats://relay:pw@192.0.2.10:4222",
                "nats://TOKEN@192.0.2.10:4222", "nats://127.0.0.1:4222",
                "nats://127.8.9.10:4222", "nats://localhost:4222", "nats://[::1]:4222"):
        assert RelayConfig(cluster=(url,)).cluster == (url,)
    assert RelayConfig(cluster=(OPEN,), cluster_token_file="t").cluster == (OPEN,)
    assert RelayConfig(cluster=(OPEN,), cluster_cafile="ca.pem").cluster == (OPEN,)
    assert RelayConfig(cluster=(OPEN,), cluster_insecure=True).cluster_insecure
    # one open URL among secure ones is enough to refuse, and it is named
    with pytest.raises(ValueError, match=r"--cluster nats://192\.0\.2\.10:4222 has neither"):
        RelayConfig(cluster=("nats://u:p@192.0.2.11:4222", OPEN))
    assert insecure_nats_urls((OPEN, "nats://u:p@h:1"), tls=False, token_file=False) == [OPEN]


@pytest.mark.parametrize("host", [
    "127.0.0.1.nip.io",  # a DNS name: may resolve anywhere (it did pass as "127.")
    "127.evil.example",
    "127.1",  # not an IP literal the check accepts (inet_aton would read 127.0.0.1)
    "localhost.example.org",
    "[::ffff:192.0.2.10]",
    "0.0.0.0",
])
def test_only_loopback_literals_and_localhost_pass_without_credentials(host: str) -> None:
    """Issue 39 §8: any host name beginning "127." passed as loopback. Now only an IP
    literal in 127.0.0.0/8, ::1 or exactly localhost does; the rest is refused."""
    url = f"nats://{host}:4222"
    assert insecure_nats_urls((url,), tls=False, token_file=False) == [url]
    with pytest.raises(ValueError, match="has neither TLS nor credentials"):
        RelayConfig(cluster=(url,))
    out = subprocess.run(
        sdschat("relay", "--port", "0", "--cluster", url, "--cluster-timeout", "1"),
        cwd=ROOT, capture_output=True, text=True, timeout=T(30), check=False,
    )
    assert out.returncode == 2 and "neither TLS nor credentials" in out.stderr, out.stderr
    assert "relay_listening" not in out.stderr


def test_loopback_literals_in_any_spelling_pass() -> None:
    for url in ("nats://127.255.0.1:4222", "nats://LOCALHOST:4222", "nats://[::1]:4222",
                "nats://[0:0:0:0:0:0:0:1]:4222"):
        assert insecure_nats_urls((url,), tls=False, token_file=False) == [], url
