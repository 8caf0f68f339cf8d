"""The ``sdschat`` entry point: version, help and the core demo, as a user runs them."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from app.cli import main
from app.core_demo import run_core_demo

SDSCHAT = Path(sys.executable).with_name("sdschat")


def test_version_from_installed_console_script() -> None:
    out = subprocess.run(
        [str(SDSCHAT), "--version"], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.startswith("sdschat ")
    assert out.stdout.split()[1][0].isdigit()


def test_help_lists_subcommands() -> None:
    out = subprocess.run(
        [str(SDSCHAT), "--help"], capture_output=True, text=True, timeout=60, check=True
    )
    assert "demo" in out.stdout


def test_no_subcommand_prints_help_and_fails() -> None:
    assert main([]) == 2


def test_core_demo_converges_under_heavy_loss() -> None:
    buf = io.StringIO()
    assert run_core_demo(messages=15, loss=0.5, seed=3, out=buf) == 0
    text = buf.getvalue()
    assert "converged      yes" in text
    assert "dropped" in text


def test_core_demo_without_loss_needs_no_repair() -> None:
    buf = io.StringIO()
    assert run_core_demo(messages=10, loss=0.0, seed=1, out=buf) == 0
    lines = dict(
        line.split(None, 1) for line in buf.getvalue().splitlines() if line.startswith("  Repair")
    )
    assert lines["RepairRequested"].strip() == "0"
    assert lines["RepairSent"].strip() == "0"
