"""Issue 41 (daily use, round three), the start of ``sdschat join`` and ``sdschat demo``
without a screen: what is checked before anything is asked, and what is printed."""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from pathlib import Path

import pytest

from app.cli import main


@pytest.mark.parametrize("headless", [False, True])
@pytest.mark.parametrize("where", ["under_a_file", "proc"])
def test_a_data_dir_that_cannot_work_is_said_before_a_passphrase_is_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    headless: bool, where: str,
) -> None:
    """Item 13: ``--data-dir`` under a regular file said "Restore the file from a backup"
    (nothing to restore: the path is wrong), and ``--data-dir /proc/nope`` asked the
    passphrase first, then failed. Now both stop at once, naming why, asking nothing."""
    afile = tmp_path / "notes.txt"
    afile.write_text("my notes")
    data_dir = afile / "chat" if where == "under_a_file" else Path("/proc/nope")

    def asked(*_a: object, **_k: object) -> str:
        raise AssertionError("a passphrase was asked")

    monkeypatch.setattr(getpass, "getpass", asked)
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    import app.tui.app as tui_app

    monkeypatch.setattr(tui_app, "make_app", asked)  # the TUI would ask in its first screen
    argv = ["join", "general", "--data-dir", str(data_dir), "--no-config"]
    status = main([*argv, "--headless"] if headless else argv)
    err = capsys.readouterr().err
    assert status == 4, err
    assert "Restore" not in err and "backup" not in err
    if where == "under_a_file":
        assert f"{afile} is a file, not a directory" in err
        assert afile.read_text() == "my notes"
    else:
        assert "/proc/nope" in err and "cannot be created" in err
    assert "give --data-dir a directory you can write to" in err


def test_the_demo_says_how_to_stop_it_as_this_shell_can_type_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 13: right after ``make demo`` the venv is not on PATH, and the demo's own
    line said ``sdschat demo --stop``: "command not found". It says the path then."""
    from app.launch.demo import sdschat_command

    venv_bin = Path(sys.executable).parent
    if not (venv_bin / "sdschat").exists():
        pytest.skip("no sdschat script beside this Python (not an installed venv)")
    monkeypatch.chdir(venv_bin.parent.parent)  # the repository, where `make demo` runs
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    shown = sdschat_command()
    assert shown != "sdschat" and shown.endswith("bin/sdschat")
    assert os.access(shown if os.path.isabs(shown) else Path.cwd() / shown, os.X_OK)
    monkeypatch.setenv("PATH", f"{venv_bin}:/usr/bin:/bin")  # `. .venv/bin/activate`
    assert sdschat_command() == "sdschat"


def _args(**given: object) -> argparse.Namespace:
    base: dict[str, object] = {"channel": "team", "data_dir": None, "relay": None, "lan": False,
                               "interface": [], "store": None, "invite": None, "create": False}
    base.update(given)
    return argparse.Namespace(**base)


def test_one_rule_decides_the_relays_and_store_of_a_start(tmp_path: Path) -> None:
    """"A start restores the whole setup": --invite (and --link, later) first, then the
    network flags, then the last run's, then the config file, then LAN; the store peers
    from --store (repeatable), else the last run's, else the config file's. What came
    from the config file is not kept (it keeps itself); a start that fails keeps nothing
    (record_start is called once joined)."""
    from app.launch.last_setup import apply_last_setup, load_setup, record_start

    d = str(tmp_path)
    config = {"relay": "ws://127.0.0.1:7001"}
    plan = apply_last_setup(first := _args(data_dir=d), config)
    assert (plan.network_from, first.relay) == ("config file", None)  # settings reads the file
    record_start(plan)
    assert not load_setup(tmp_path).network  # nothing to restore: the config file says it

    stores = ["ws://127.0.0.1:7102", "ws://127.0.0.1:7103"]  # --store twice: failover
    plan = apply_last_setup(_args(data_dir=d, relay=["ws://127.0.0.1:7002"],
                                  store=list(stores)), config)  # fmt: skip
    assert (plan.network_from, plan.store_from) == ("flags", "flags")
    assert load_setup(tmp_path) == load_setup(tmp_path / "none")  # not kept before the start
    record_start(plan)

    again = _args(data_dir=d)
    plan = apply_last_setup(again, config)  # the last run's beat the config file's
    assert (plan.network_from, again.relay) == ("last run", ["ws://127.0.0.1:7002"])
    assert (plan.store_from, again.store) == ("last run", stores)  # both, in order
    assert load_setup(tmp_path).stores == tuple(stores)
    assert plan.note.startswith("the relays and the store peer of the last run")

    code = _args(data_dir=d, invite="sdschat-invite:x", relay=["ws://127.0.0.1:7003"])
    assert apply_last_setup(code, config).network_from == "invite"  # the code's relays
    assert code.relay == ["ws://127.0.0.1:7003"]
    lan = _args(data_dir=d, lan=True, interface=["127.0.0.1"])
    plan = apply_last_setup(lan, config)
    assert (plan.network_from, lan.relay) == ("flags", None)
    record_start(plan)  # LAN only, this time: the next start too
    after = _args(data_dir=d)
    apply_last_setup(after, {})
    assert (after.relay, after.lan, after.interface) == (None, True, ["127.0.0.1"])


def test_a_restart_as_the_readme_says_keeps_the_relay_the_invite_named(tmp_path: Path) -> None:
    """Item 1: bob joins by invite (the relay comes from the code), quits; alice types 3
    lines; ``sdschat join team --data-dir bob`` ran LAN gossip ("LAN 0 peers") and showed
    none of them. Now it uses the relay of the last run, beating the config file's (a
    dead one here: so the run before the fix did not multicast either), and ``sdschat
    join`` alone opens the same setup."""
    from tests.procs import Cluster, running, sdschat

    dead = tmp_path / "dead-relay.toml"
    dead.write_text('relay = "ws://127.0.0.1:9"\n')  # nothing listens on the discard port
    alice_dir, bob_dir = tmp_path / "alice", tmp_path / "bob"
    with running(Cluster(tmp_path)) as c:
        _relay, url = c.relay()
        alice = c.start(sdschat("join", "team", "--create", "--headless", "--fast", "--relay",
                                url, "--name", "alice", "--data-dir", str(alice_dir),
                                "--no-config"), "alice")  # fmt: skip
        alice.wait_for(lambda: bool(alice.select("members", what="created")), 60, "created")
        alice.send("/invite")
        alice.wait_for(lambda: bool(alice.select("invite")), 30, "an invite")
        code = alice.select("invite")[-1]["code"]
        bob = c.start(sdschat("join", "--invite", code, "--headless", "--fast", "--name",
                              "bob", "--data-dir", str(bob_dir), "--config", str(dead)),
                      "bob")  # fmt: skip
        bob.wait_for(lambda: bool(bob.select("members", what="joined")), 60, "bob joined")
        bob.send("/quit")
        assert bob.wait(60) == 0
        lines = ["one", "two", "three"]
        alice.send(*lines)
        alice.wait_for(lambda: len([e for e in alice.select("own", state="sent")]) >= 3, 30,
                       "alice's lines sent")  # fmt: skip

        def got(p: object, want: list[str]) -> bool:
            texts = [e["text"] for e in p.select("delivered")]  # type: ignore[attr-defined]
            return all(w in texts for w in want)

        again = c.start(sdschat("join", "team", "--headless", "--fast", "--data-dir",
                                str(bob_dir), "--config", str(dead)), "bob2")  # fmt: skip
        again.wait_for(lambda: got(again, lines), 90, "the three lines, through the relay")
        note = [e for e in again.select("info") if "last run" in e.get("text", "")]
        assert note and note[0]["data"] == {"restored": "last run"}
        again.send("/quit")
        assert again.wait(60) == 0
        alice.send("four")
        alone = c.start(sdschat("join", "--headless", "--fast", "--data-dir", str(bob_dir),
                                "--config", str(dead)), "bob3")  # fmt: skip
        alone.wait_for(lambda: got(alone, ["four"]), 90, "the fourth, `sdschat join` alone")
        assert alone.select("channel", channel="team")
        alone.send("/quit")
        assert alone.wait(60) == 0


def test_an_invite_code_cut_short_is_incomplete_and_a_dead_one_nobody_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 11 without a screen: the first line of a wrapped code is "incomplete" (it
    said "a character is wrong"), and a code nobody answers says so within the bound,
    after an ``info`` event that nobody has answered yet (it waited five minutes)."""
    import json

    import app.launch.invite_wait as invite_wait
    from app.members.invite import encode_invite, make_invite
    from app.node.runtime import wall_ms

    code = encode_invite(make_invite("team", bytes(32), ("ws://127.0.0.1:9",), now_ms=wall_ms()))
    first_line = code[:70]
    status = main(["join", "--invite", first_line, "--headless", "--no-config",
                   "--data-dir", str(tmp_path / "a")])  # fmt: skip
    err = capsys.readouterr().err
    assert status == 2 and "incomplete: its end is missing" in err, err
    assert "character is wrong" not in err

    monkeypatch.setattr(invite_wait, "NOTICE_S", 0.5)
    monkeypatch.setattr(invite_wait, "ANSWER_S", 3.0)
    status = main(["join", "--invite", code, "--headless", "--no-config", "--fast",
                   "--data-dir", str(tmp_path / "b")])  # fmt: skip
    captured = capsys.readouterr()
    events = [json.loads(line) for line in captured.out.splitlines() if line.startswith("{")]
    assert status == 2, captured.err
    assert any(e.get("data", {}).get("invite") == "no_answer_yet" for e in events)
    assert "nobody answered the invite to #team within 3 s" in captured.err
