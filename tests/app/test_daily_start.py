"""Issue 41 (daily use, round three), the start of ``sdschat join`` and ``sdschat demo``
without a screen: what is checked before anything is asked, and what is printed."""

from __future__ import annotations

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
