"""Every command block of the docs marked runnable is run, against 127.0.0.1.

A fenced block whose info string is ``sh runnable`` (or ``bash runnable``) in
README.md or docs/*.md is executed by bash (``-x -e -o pipefail``: a failure
shows the command it stopped at, and a block that hangs past its time shows
what it printed until then) in a fresh temporary directory, with:

* ``sdschat`` on PATH running this source tree (``python -m app.cli``);
* HOME pointing into the temporary directory;
* the well-known ports in the text (8765 relay, 8766 store, 4222/6222/8222
  NATS) replaced by ports free right now, so a block can use the ports a
  reader would and still run beside other tests;
* ``needs:TOOL`` words after ``runnable`` (``sh runnable needs:openssl``):
  the block is skipped, saying so, where TOOL is not installed.

Every other shell block of the operator docs (:data:`CHECKED_DOCS`) must say
why it is not run, in its info string: ``sh not-run: pipx installs from
PyPI`` (at least three words of reason). A systemd unit is an ``ini
systemd-unit`` block: its ``ExecStart`` is parsed by sdschat's own argument
parser (every flag exists, every value is accepted) and the file is checked
by ``systemd-analyze verify`` where that program exists.

The block runs in a process group of its own; whatever it left running is
killed (by that group's id) when it ends. Each block has 120 s (scaled by
``SDSCHAT_TEST_TIMEOUT_SCALE``).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.procs import ROOT, T, free_port

FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)$")
RUNNABLE_LANGS = {"sh", "bash", "shell", "console"}
PORTS = ("8765", "8766", "8767", "4222", "4223", "4224", "6222", "6223", "6224", "8222")
CHECKED_DOCS = ("README.md", *sorted(
    str(p.relative_to(Path(__file__).resolve().parents[1]))
    for p in (Path(__file__).resolve().parents[1] / "docs").glob("*.md")
))
"""Every doc: each shell block is run or says why not."""


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    info: str
    code: str

    @property
    def needs(self) -> list[str]:
        return [w.split(":", 1)[1] for w in self.info.split() if w.startswith("needs:")]

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def fenced_blocks(path: Path) -> list[Block]:
    """Every fenced block of ``path``, with its info string."""
    out: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        fence, info, start = m.group("fence"), m.group("info").strip(), i + 1
        j = start
        while j < len(lines) and not lines[j].strip().startswith(fence):  # bounded by the file
            j += 1
        out.append(Block(path, start, info, "\n".join(lines[start:j]) + "\n"))
        i = j + 1
    return out


def is_runnable(block: Block) -> bool:
    words = block.info.split()
    return len(words) >= 2 and words[0] in RUNNABLE_LANGS and "runnable" in words[1:]


def blocks_in(path: Path) -> list[Block]:
    """The fenced blocks of ``path`` whose info string says ``runnable``."""
    return [b for b in fenced_blocks(path) if is_runnable(b)]


def not_run_reason(block: Block) -> str | None:
    """The reason after ``not-run:`` in the info string, or None."""
    m = re.search(r"\bnot-run:(.*)$", block.info)
    return m.group(1).strip() if m else None


def doc_files() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [f for f in files if f.is_file()]


ALL_BLOCKS = [b for f in doc_files() for b in blocks_in(f)]


def test_the_extractor_finds_runnable_blocks_only(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text(
        "text\n```sh\nnot run\n```\n```sh runnable\necho one\n```\n"
        "````bash runnable needs:jq\necho ```\necho two\n````\n```ini\n[x]\n```\n"
    )
    got = [(b.code, b.needs) for b in blocks_in(doc)]
    assert got == [("echo one\n", []), ("echo ```\necho two\n", ["jq"])]


def test_the_deploy_guide_has_runnable_blocks() -> None:
    assert any(b.path.name == "deploy.md" for b in ALL_BLOCKS)


def test_the_reason_not_to_run_a_block_is_read_from_its_info_string(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text("```sh not-run: it installs from PyPI\npipx install x\n```\n```sh\nls\n```\n")
    assert [not_run_reason(b) for b in fenced_blocks(doc)] == ["it installs from PyPI", None]
    assert blocks_in(doc) == []


@pytest.mark.parametrize("doc", CHECKED_DOCS)
def test_every_shell_block_of_the_operator_docs_is_run_or_says_why(doc: str) -> None:
    unexplained = []
    for block in fenced_blocks(ROOT / doc):
        words = block.info.split()
        if not words or words[0] not in RUNNABLE_LANGS or is_runnable(block):
            continue
        reason = not_run_reason(block)
        if reason is None or len(reason.split()) < 3:
            unexplained.append(f"{block.name}: ```{block.info}")
    assert not unexplained, (
        "shell blocks neither 'runnable' nor 'not-run: REASON':\n" + "\n".join(unexplained)
    )


UNIT_BLOCKS = [
    b
    for doc in CHECKED_DOCS
    for b in fenced_blocks(ROOT / doc)
    if b.info.split()[:2] == ["ini", "systemd-unit"]
]


def test_the_deploy_guide_has_its_units() -> None:
    unit = re.compile(r"sdschat-(\w+)\.service")
    names = {m.group(1) for b in UNIT_BLOCKS for m in unit.finditer(b.code)}
    assert {"relay", "store", "reports"} <= names


def _exec_start(unit: str) -> list[str]:
    """The ``ExecStart`` command line of a unit file (backslash continuations joined)."""
    joined = re.sub(r"\\\n\s*", " ", unit)
    lines = [line for line in joined.splitlines() if line.startswith("ExecStart=")]
    assert len(lines) == 1, "one ExecStart= line"
    return shlex.split(lines[0].removeprefix("ExecStart="))


@pytest.mark.parametrize("block", UNIT_BLOCKS, ids=[b.name for b in UNIT_BLOCKS])
def test_systemd_unit(block: Block, tmp_path: Path) -> None:
    from app.cli import build_parser

    argv = _exec_start(block.code)
    assert Path(argv[0]).name == "sdschat", argv[0]
    assert argv[1] in ("relay", "store", "report-server"), argv
    try:
        args = build_parser().parse_args(argv[1:])  # every flag exists, every value parses
    except SystemExit as exc:
        pytest.fail(f"{block.name}: sdschat rejects {shlex.join(argv[1:])} (exit {exc.code})")
    if argv[1] == "relay":
        from net.relay_config import config_from_args as relay_config

        relay_config(args)  # the values together make a valid configuration
    elif argv[1] == "report-server":
        from pipeline.report import check_server_options

        check_server_options(args)
    else:
        from app.launch.store_cmd import config_from_args as store_config

        store_config(args)
    tool = shutil.which("systemd-analyze")
    if tool is None:
        return
    _shim(tmp_path / "bin")
    # systemd-analyze wants the executable to exist: point ExecStart at the shim
    unit = block.code.replace(argv[0], str(tmp_path / "bin" / "sdschat"), 1)
    name = re.search(r"sdschat-\w+\.service", block.code)
    assert name is not None
    path = tmp_path / name.group(0)
    path.write_text(unit)
    proc = subprocess.run(
        [tool, "verify", str(path)], capture_output=True, text=True, timeout=T(30), check=False
    )
    complaints = [line for line in (proc.stdout + proc.stderr).splitlines() if path.name in line]
    assert proc.returncode == 0 and not complaints, f"{block.name}:\n{proc.stdout}{proc.stderr}"


def _shim(bin_dir: Path) -> None:
    bin_dir.mkdir()
    exe = bin_dir / "sdschat"
    exe.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m app.cli \"$@\"\n")
    exe.chmod(0o755)


@pytest.mark.parametrize("block", ALL_BLOCKS, ids=[b.name for b in ALL_BLOCKS])
def test_runnable_block(block: Block, tmp_path: Path) -> None:
    missing = [tool for tool in block.needs if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{block.name} needs {', '.join(missing)}, not installed here")
    code = block.code
    for port in PORTS:
        if port in code:
            code = re.sub(rf"\b{port}\b", str(free_port()), code)
    _shim(tmp_path / "bin")
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "home").mkdir()
    env = {
        **os.environ,
        "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
        "HOME": str(tmp_path / "home"),
        "PYTHONUNBUFFERED": "1",
    }
    script = tmp_path / "block.sh"
    script.write_text(code)
    proc = subprocess.Popen(
        ["bash", "-x", "-e", "-o", "pipefail", str(script)],  # -x: a failure shows where
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, killed below by its id
    )
    timed_out = False
    try:
        out, _ = proc.communicate(timeout=T(120))
    except subprocess.TimeoutExpired:
        timed_out = True
        out = b""
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    if timed_out:  # what it printed up to the kill, to see where it hung
        with contextlib.suppress(subprocess.TimeoutExpired):
            out, _ = proc.communicate(timeout=T(10))
        proc.returncode = -1
    elif proc.poll() is None:
        proc.wait(T(10))
    text = ("TIMED OUT after 120 s\n" if timed_out else "") + out.decode(errors="replace")
    logs = "".join(
        f"\n--- {p.name}\n{p.read_text(errors='replace')[-1500:]}"
        for p in sorted(work.glob("*.log")) + sorted(work.glob("*.jsonl"))
    )
    assert proc.returncode == 0, f"{block.name} failed ({proc.returncode}):\n{text}{logs}"
