"""``sdschat join --headless`` and ``sdschat history`` as processes: exits and error paths."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from e2e_helpers import ROOT, T, cluster, history

URL = "ws://127.0.0.1:9"  # nothing listens there: the node just stays disconnected


def _join(
    tmp: Path, *extra: str, stdin: str = "", data_dir: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    argv = [
        sys.executable,
        "-m",
        "app.cli",
        "join",
        "room",
        "--relay",
        URL,
        "--data-dir",
        str(data_dir or tmp / "d"),
        "--name",
        "n",
        *extra,
    ]
    return subprocess.run(argv, cwd=ROOT, input=stdin.encode(), capture_output=True, timeout=T(60))


def test_eof_exits_cleanly_and_saves_state(tmp_path: Path) -> None:
    r = _join(tmp_path, "--headless", stdin="offline line\n/who\n/help\n/stats\n")
    # the line could not be sent (no relay): named at EOF, exit 6 (app/headless/line_feed.py);
    # it stays durable in the outbox for the next start
    assert r.returncode == 6, r.stderr
    assert b"1 line(s) read were not sent: line 1 (local_id " in r.stderr
    out = r.stdout.decode()
    assert '"event":"closed"' in out and '"public":true' in out
    assert '"event":"peers"' in out
    hist = history(tmp_path / "d")
    assert [(h["content"], h["state"]) for h in hist] == [("offline line", "queued")]
    db = sqlite3.connect(tmp_path / "d" / "sdschat.db")
    try:
        assert db.execute("SELECT count(*) FROM core_state").fetchone()[0] == 1
        assert db.execute("SELECT count(*) FROM outbox WHERE message_id IS NULL").fetchone()[0] == 0
    finally:
        db.close()


def test_quit_command_exits_zero(tmp_path: Path) -> None:
    r = _join(tmp_path, "--headless", stdin="/quit\nnever sent\n")
    assert r.returncode == 0
    assert history(tmp_path / "d") == []


def test_passphrase_file_problems(tmp_path: Path) -> None:
    r = _join(tmp_path, "--headless", "--passphrase-file", str(tmp_path / "missing"))
    assert r.returncode == 5 and b"cannot read passphrase file" in r.stderr
    empty = tmp_path / "empty"
    empty.write_text("")
    r = _join(tmp_path, "--headless", "--passphrase-file", str(empty))
    assert r.returncode == 5 and b"empty" in r.stderr
    good, other = tmp_path / "good", tmp_path / "other"
    good.write_text("one\n")
    other.write_text("two\n")
    assert _join(tmp_path, "--headless", "--passphrase-file", str(good)).returncode == 0
    r = _join(tmp_path, "--headless", "--passphrase-file", str(other))
    assert r.returncode == 5 and b"different passphrase" in r.stderr


def test_locked_data_dir(tmp_path: Path) -> None:
    with cluster(tmp_path) as c:
        first = c.node("n", URL, data_dir=tmp_path / "d")
        first.wait_for(lambda: bool(first.select("channel")), 20, "first node up")
        r = _join(tmp_path, "--headless")
        assert r.returncode == 3
        assert b"in use by another sdschat instance" in r.stderr
        assert b'"fatal":true' in r.stdout
        first.close_stdin()
        assert first.wait(20) == 0


def test_newer_and_corrupt_database(tmp_path: Path) -> None:
    assert _join(tmp_path, "--headless").returncode == 0
    db = sqlite3.connect(tmp_path / "d" / "sdschat.db")
    db.execute("PRAGMA user_version = 999")
    db.commit()
    db.close()
    r = _join(tmp_path, "--headless")
    assert r.returncode == 4 and b"newer sdschat" in r.stderr
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "sdschat.db").write_bytes(b"this is not sqlite" * 100)
    r = _join(tmp_path, "--headless", data_dir=bad)
    assert r.returncode == 4 and b"not a usable sdschat database" in r.stderr


def test_damaged_page_found_at_join_exits_4(tmp_path: Path) -> None:
    """A file that opens but has damaged pages, found when the channel is joined: the
    fatal error event and exit 4, not a traceback."""
    import random

    # offline (no relay): the lines are durable but not sent, named at EOF (exit 6)
    assert _join(tmp_path, "--headless", stdin="hello one\nhello two\n").returncode == 6
    with (tmp_path / "d" / "sdschat.db").open("r+b") as f:
        f.seek(16384 * 3)
        f.write(random.Random(1).randbytes(16384 * 5))
    damaged = (tmp_path / "d" / "sdschat.db").read_bytes()
    r = _join(tmp_path, "--headless", stdin="hi\n")
    assert r.returncode == 4, r.stderr
    assert b"Traceback" not in r.stderr
    assert b'"fatal":true' in r.stdout and b"malformed" in r.stdout
    # the refused run wrote nothing (an unchanged identity is not rewritten at open)
    assert (tmp_path / "d" / "sdschat.db").read_bytes() == damaged
    assert not (tmp_path / "d" / "sdschat.db-wal").exists()


def test_bad_settings_exit_2(tmp_path: Path) -> None:
    r = _join(tmp_path, "--headless", "--drop-rate", "2")
    assert r.returncode == 2 and b"drop-rate" in r.stderr
    cfg = tmp_path / "c.toml"
    cfg.write_text("[protocol]\nnot_a_field = 1\n")
    r = _join(tmp_path, "--headless", "--config", str(cfg))
    assert r.returncode == 2 and b"not_a_field" in r.stderr


def test_history_errors(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "app.cli", "history", "room", "--data-dir", str(tmp_path / "none")],
        cwd=ROOT,
        capture_output=True,
        timeout=T(30),
    )
    assert r.returncode == 1 and b"no sdschat database" in r.stderr


def test_history_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    """``sdschat history ... | head -1``: the reader leaves early; history stops with
    exit 0 and no BrokenPipeError traceback."""
    lines = "".join(f"line {i}\n" for i in range(1500))
    assert _join(tmp_path, "--headless", "--fast", stdin=lines).returncode == 6  # offline
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "history", "room", "--data-dir",
         str(tmp_path / "d"), "--json"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert b'"content": "line 0"' in proc.stdout.readline()
    proc.stdout.close()  # what head does after its line
    err = proc.stderr.read()
    assert proc.wait(timeout=T(30)) == 0, err
    assert b"Traceback" not in err and b"BrokenPipe" not in err
