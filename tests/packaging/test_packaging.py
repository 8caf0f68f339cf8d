"""Packaging: the wheel installs the chat without Spark, and the chat never imports it.

``test_wheel_in_a_fresh_venv`` builds the wheel from a copy of the source tree,
installs it (with its dependencies, from the machine's package index and pip
cache) into a new virtual environment in a temporary directory outside the
repository, and runs the installed ``sdschat``: ``--version``, ``demo --core``,
``report`` (which must say what to install, the report extra not being
there) and a relay with two headless nodes chatting over 127.0.0.1.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.procs import ROOT, Cluster, T, running

HEAVY = ("pyarrow", "pandas", "pyspark")

# Every module a chat command (join, relay, store, history, demo) loads.
CHAT_MODULES = (
    "app.cli", "app.headless.run", "app.node.runtime", "app.chat.history", "app.launch.demo",
    "app.launch.core_demo", "app.launch.store_cmd", "app.node.transport", "app.tui.run",
    "app.tui.app",
    "net.relay", "net.relay_client", "net.store_peer", "net.store_client", "net.store_sync",
    "net.lan.transport", "net.lan.store_feed", "storage", "sds",
)


def _source_copy(dest: Path) -> Path:
    """The tracked and new (not ignored) files of the working tree, copied to ``dest``."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True, timeout=T(30),
    ).stdout.decode()
    for rel in filter(None, out.split("\0")):
        src = ROOT / rel
        if src.is_file():
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    return dest


def _build_wheel(tmp: Path) -> Path:
    src = _source_copy(tmp / "src")
    dist = tmp / "dist"
    argv = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(src)]
    setuptools_ok = False
    if importlib.util.find_spec("setuptools") is not None:
        import setuptools

        setuptools_ok = int(setuptools.__version__.split(".")[0]) >= 77
    if setuptools_ok:  # the build backend is here: no isolated build env to download
        argv.insert(5, "--no-build-isolation")
    subprocess.run(argv, check=True, capture_output=True, timeout=T(180))
    (wheel,) = dist.glob("sdschat-*.whl")
    return wheel


def test_pyproject_license_is_spdx_and_spark_is_an_extra() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert meta["license"] == "MIT"  # an SPDX expression, not a table
    deps = " ".join(meta["dependencies"]).lower()
    for name in HEAVY:
        assert name not in deps, f"{name} is a core dependency"
        assert any(d.lower().startswith(name) for d in meta["optional-dependencies"]["report"])
    assert "sdschat[report]" in meta["optional-dependencies"]["dev"]


def test_chat_paths_import_no_spark_pandas_or_arrow() -> None:
    code = (
        "import importlib, sys\n"
        f"for m in {CHAT_MODULES!r}: importlib.import_module(m)\n"
        f"print([m for m in sys.modules if m.split('.')[0] in {HEAVY!r}])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, timeout=T(60), check=True
    )
    assert out.stdout.decode().strip() == "[]"


def test_every_package_is_in_the_wheel(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    shipped = {n.rsplit("/", 1)[0] for n in names if n.endswith("/__init__.py")}
    expected = {
        str(p.parent.relative_to(ROOT))
        for root in ("sds", "net", "storage", "app", "pipeline")
        for p in (ROOT / root).rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    assert expected <= shipped, f"packages missing from the wheel: {sorted(expected - shipped)}"
    assert not any(n.startswith(("tests/", "bench/")) for n in names)
    for data in (
        "app/tui/sdschat.tcss",
        "sds/py.typed",
        "net/envelope.proto",
        "app/chat/content.proto",
        "app/chat/content_pb2.pyi",
    ):
        assert data in names


def _run(
    argv: list[str], cwd: Path, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=T(timeout)
    )


@pytest.mark.slow
def test_wheel_in_a_fresh_venv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHONPATH", raising=False)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    wheel = _build_wheel(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=T(120))
    py, exe = venv / "bin" / "python", venv / "bin" / "sdschat"
    install = _run([str(py), "-m", "pip", "install", "-q", str(wheel)], tmp_path, env, 600)
    assert install.returncode == 0, install.stderr[-3000:]

    where = _run([str(py), "-c", "import app, sys; print(app.__file__)"], tmp_path, env, 30)
    assert where.stdout.strip().startswith(str(venv)), where.stdout
    heavy = _run([str(py), "-c", f"import importlib.util as u; print([m for m in {HEAVY!r} "
                  "if u.find_spec(m)])"], tmp_path, env, 30)
    assert heavy.stdout.strip() == "[]", "the chat install pulled in the report extra"

    version = _run([str(exe), "--version"], tmp_path, env, 30)
    assert version.returncode == 0 and version.stdout.startswith("sdschat 0"), version

    demo = _run([str(exe), "demo", "--core"], tmp_path, env, 120)
    assert demo.returncode == 0, demo.stderr[-2000:]
    assert "converged      yes" in demo.stdout

    report = _run([str(exe), "report", str(tmp_path), "--out", str(tmp_path / "r")],
                  tmp_path, env, 30)
    assert report.returncode == 2
    assert report.stderr.count("\n") == 1, report.stderr
    assert "pip install 'sdschat[report]'" in report.stderr
    assert not (tmp_path / "r").exists()

    with running(Cluster(tmp_path)) as c:
        relay = c.start([str(exe), "relay", "--port", "0", "--stats-interval", "0"], "relay",
                        stdin=False)
        url = f"ws://127.0.0.1:{int(relay.wait_log('relay_listening')['port'])}"
        nodes = [
            c.start([str(exe), "join", "room", "--headless", "--fast", "--relay", url,
                     "--data-dir", str(tmp_path / n), "--name", n], n)
            for n in ("alice", "bob")
        ]
        for p in nodes:
            p.wait_for(lambda p=p: bool(p.select("connection", state="connected")), 30,
                       "connected")
        nodes[0].send("hello from the wheel")
        nodes[1].wait_for(
            lambda: any(e.get("text") == "hello from the wheel" for e in nodes[1].select(
                "delivered")), 30, "alice's line delivered")
        for p in nodes:
            p.close_stdin()
            assert p.wait(30) == 0, p.tail()
    hist = _run([str(exe), "history", "room", "--data-dir", str(tmp_path / "bob"), "--json"],
                tmp_path, env, 30)
    assert [json.loads(x)["content"] for x in hist.stdout.splitlines()] == ["hello from the wheel"]
