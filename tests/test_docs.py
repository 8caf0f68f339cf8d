"""Every command block of the docs marked runnable is run, against 127.0.0.1.

A fenced block whose info string is ``sh runnable`` (or ``bash runnable``) in
README.md or docs/*.md is executed by bash (``-e -o pipefail``) in a fresh
temporary directory, with:

* ``sdschat`` on PATH running this source tree (``python -m app.cli``);
* HOME pointing into the temporary directory;
* the well-known ports in the text (8765 relay, 8766 store, 4222/6222/8222
  NATS) replaced by ports free right now, so a block can use the ports a
  reader would and still run beside other tests;
* ``needs:TOOL`` words after ``runnable`` (``sh runnable needs:openssl``):
  the block is skipped, saying so, where TOOL is not installed.

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
PORTS = ("8765", "8766", "4222", "6222", "8222")


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


def blocks_in(path: Path) -> list[Block]:
    """The fenced blocks of ``path`` whose info string says ``runnable``."""
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
        words = info.split()
        if len(words) >= 2 and words[0] in RUNNABLE_LANGS and "runnable" in words[1:]:
            out.append(Block(path, start, info, "\n".join(lines[start:j]) + "\n"))
        i = j + 1
    return out


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
        ["bash", "-e", "-o", "pipefail", str(script)],
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, killed below by its id
    )
    try:
        out, _ = proc.communicate(timeout=T(120))
    except subprocess.TimeoutExpired:
        out = b""
        proc.returncode = -1
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.wait(T(10))
    text = out.decode(errors="replace")
    logs = "".join(
        f"\n--- {p.name}\n{p.read_text(errors='replace')[-1500:]}"
        for p in sorted(work.glob("*.log")) + sorted(work.glob("*.jsonl"))
    )
    assert proc.returncode == 0, f"{block.name} failed ({proc.returncode}):\n{text}{logs}"
