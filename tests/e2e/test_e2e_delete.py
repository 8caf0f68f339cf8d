"""Delete means gone: a deleted line's text is in no file of any member's data directory.

Real processes over a real relay (loopback): alice creates a members channel, bob
and carol join by invite, alice types a line she regrets and deletes it. As soon as
each member's node says it has overwritten its copy (``/stats``: ``redacted``), every
file of every member's data directory (the database, its ``-wal`` and ``-shm``, the
members files, the identity, ``channels.json``, whatever else is there) is read
byte for byte, as ``strings`` would, for the text in UTF-8 and UTF-16. The nodes are
still running: nothing is left for a clean shutdown to tidy away. Before the fix the
text stayed minutes in every member's ``sdschat.db-wal`` (issue 41 item 7).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from e2e_helpers import Cluster, Proc, cluster

SECRET = "oops secret password hunter2"
FORMS = {
    "utf-8": SECRET.encode(),
    "utf-16-le": SECRET.encode("utf-16-le"),
    "utf-16-be": SECRET.encode("utf-16-be"),
}


def _members(p: Proc, what: str) -> None:
    p.wait_for(lambda: bool(p.select("members", what=what)), 60, f"members channel {what}")
    p.wait_for(lambda: bool(p.select("connection", state="connected")), 30, "connected")


def _invite(admin: Proc) -> str:
    before = len(admin.select("invite"))
    admin.send("/invite")
    admin.wait_for(lambda: len(admin.select("invite")) > before, 30, "an invite code")
    return str(admin.select("invite")[-1]["code"])


def _join(c: Cluster, name: str, code: str, url: str) -> Proc:
    argv = [sys.executable, "-m", "app.cli", "join", "--invite", code, "--data-dir",
            str(c.tmp / name), "--name", name, "--headless", "--fast", "--relay", url]  # fmt: skip
    p = c.start(argv, name)
    _members(p, "joined")
    return p


def _stats(p: Proc) -> dict[str, Any]:
    before = len(p.select("info", text="stats"))
    p.send("/stats")
    p.wait_for(lambda: len(p.select("info", text="stats")) > before, 30, "/stats")
    return dict(p.select("info", text="stats")[-1]["data"])


def _redacted(p: Proc) -> int:
    return int(_stats(p)["counters"].get("redacted", 0))


def _texts(p: Proc) -> list[str]:
    return [e["text"] for e in p.select("delivered")]


def found(data_dir: Path) -> list[str]:
    """Every file under ``data_dir`` holding the secret, with the encoding found."""
    hits = []
    for path in sorted(data_dir.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            hits += [f"{path.name} ({name})" for name, b in FORMS.items() if b in data]
    return hits


def test_a_deleted_line_is_in_no_file_of_any_member_while_the_nodes_run(
    tmp_path: Path,
) -> None:
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        alice = c.node("alice", url, channel="team", extra=["--create"])
        _members(alice, "created")
        bob = _join(c, "bob", _invite(alice), url)
        carol = _join(c, "carol", _invite(alice), url)
        members = (alice, bob, carol)
        alice.send("hello team", SECRET, "that was not for the channel")
        for p in (bob, carol):
            p.wait_for(lambda p=p: {SECRET, "that was not for the channel"} <= set(_texts(p)),
                       60, "the lines delivered")  # fmt: skip
        alice.wait_for(lambda: any(e.get("text") == SECRET for e in alice.select("own"))
                       and len(alice.select("own", state="acknowledged")) >= 3, 60,
                       "acknowledged")  # fmt: skip
        # the text is on everyone's disk now (the probe finds what it looks for)
        assert all(found(tmp_path / p.name) for p in members)
        secret_id = alice.select("own", state="logged", text=SECRET)[0]["message_id"]
        alice.send(f"/delete {secret_id}")
        for p in members:
            p.wait_for(lambda p=p: _redacted(p) >= 1, 60, "its copy overwritten")
        leaks = {p.name: found(tmp_path / p.name) for p in members}
        assert leaks == {"alice": [], "bob": [], "carol": []}
        # the channel goes on, and a restart does not bring the text back
        bob.send("still here")
        alice.wait_for(lambda: "still here" in _texts(alice), 60, "a later line")
        for p in members:
            p.close_stdin()
        for p in members:
            assert p.wait(60) == 0, p.tail()
        assert {p.name: found(tmp_path / p.name) for p in members} == leaks
