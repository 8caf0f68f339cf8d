"""A full disk (issue 26 §2), with a real 20 MiB tmpfs as a node's data directory, a
relay and two headless processes over loopback: a line typed while the disk is full is
refused with "disk full" (never half-sent), a ``disk`` event says so, ``sdschat doctor``
notices, and once space is freed the messages received meanwhile are fetched again
and both histories converge. Needs root (mount)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_helpers import ROOT, T, cluster, comparable, history, stdin_of

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(mnt: Path) -> Path:
    """Fill the file system to the last byte with one ballast file."""
    ballast = mnt / "ballast"
    chunk = b"\0" * (256 * 1024)
    with open(ballast, "wb", buffering=0) as f:
        for _ in range(200):  # 50 MiB at most: more than the 20 MiB there is
            try:
                f.write(chunk)
            except OSError:
                break
        for size in (65536, 4096, 512, 1):  # the last bytes
            for _ in range(64):
                try:
                    f.write(b"\0" * size)
                except OSError:
                    break
    return ballast


def _connected(p: object) -> bool:
    return any(e.get("state") == "connected" for e in p.select("connection"))  # type: ignore[attr-defined]


def _texts(p: object) -> set[str]:
    return {e["text"] for e in p.select("delivered")}  # type: ignore[attr-defined]


def test_a_full_disk_refuses_lines_and_refetches_what_it_missed(
    tmp_path: Path, small_disk: Path
) -> None:
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        alice = c.node("alice", url, data_dir=small_disk / "alice")
        bob = c.node("bob", url)
        for p in (alice, bob):
            p.wait_for(lambda p=p: _connected(p), 30, "connected")
        bob.send("before")
        alice.wait_for(lambda: "before" in _texts(alice), 30, "bob's first line")
        ballast = fill(small_disk)
        # bob keeps talking until alice's disk refuses to store one of his lines
        sent: list[str] = []
        for i in range(200):
            if alice.select("disk"):
                break
            line = f"while full {i} " + "x" * 2000
            bob.send(line)
            sent.append(line)
            n = len(sent)
            alice.wait_for(lambda n=n: bool(alice.select("disk"))
                           or len(alice.select("delivered")) + len(alice.select("error")) >= n,
                           10, "alice took bob's line")  # fmt: skip
        alice.wait_for(lambda: bool(alice.select("disk", state="full")), 30, "disk full event")
        doctor = subprocess.run(
            [sys.executable, "-m", "app.cli", "doctor", "--data-dir", str(small_disk / "alice")],
            cwd=ROOT, capture_output=True, text=True, timeout=T(60),
        )
        assert doctor.returncode == 1 and "disk full" in doctor.stdout, doctor.stdout
        alice.send("typed while full")
        alice.wait_for(
            lambda: any("disk full" in (e.get("message") or "") for e in alice.select("error")),
            20, "the line refused",
        )
        assert not any(e.get("text") == "typed while full" for e in alice.select("own"))
        bob.send("also while full")
        ballast.unlink()
        alice.wait_for(lambda: bool(alice.select("disk", state="ok")), 30, "space back")
        alice.send("after")
        bob.send("bob after")
        everything = {"before", *sent, "also while full", "bob after"}
        alice.wait_for(lambda: _texts(alice) >= everything, 90, "what alice missed, fetched")
        bob.wait_for(lambda: "after" in _texts(bob), 30, "alice's line after")
        assert "typed while full" not in _texts(bob)  # never half-sent
        for p in (alice, bob):
            pipe = stdin_of(p)
            pipe.close()
        # the refused line is named at EOF: exit 6 (app/headless/line_feed.py)
        assert alice.wait(60) == 6, alice.tail()
        assert bob.wait(60) == 0, bob.tail()
    ha, hb = history(small_disk / "alice"), history(tmp_path / "bob")
    assert comparable(ha) == comparable(hb)
    assert "typed while full" not in {h["content"] for h in ha}
