"""``sdschat demo``: a relay on 127.0.0.1 and three chat TUIs (alice, bob, carol) in tmux.

``sdschat demo`` (what ``make demo`` runs) starts a tmux session with two
windows:

* ``chat``: three panes side by side, each a real ``sdschat join general``
  TUI with its own data directory: alice, bob, and carol, whose transport
  drops 30% of envelopes in each direction (``--drop-rate 0.3``) so the
  protocol's recovery is visible: her screen shows "N earlier messages
  missing · fetching" markers that resolve as resends and repairs arrive;
* ``relay``: ``sdschat relay --host 127.0.0.1`` on a free port.

Everything listens on and talks to 127.0.0.1 only. The participants use
second-scale protocol timings (``--fast``) and share a random passphrase kept
in a mode-0600 file next to their data directories (never on a command line).
Data directories persist between runs (``--fresh`` starts over), so the TUIs
open where you left off.

It prints one line: how to attach and how to quit. ``sdschat demo --stop``
(written as this shell can run it: ``.venv/bin/sdschat demo --stop`` when the venv's
``bin`` is not on ``PATH``, :func:`sdschat_command`) ends the session (relay and
TUIs). ``sdschat demo --restart alice`` opens alice's pane again after she quit
(Ctrl+Q) or failed, with the same data directory, relay and passphrase: her TUI
opens where she left off (the session's commands are kept
in ``demo.json`` in the demo's directory). ``sdschat demo --core`` (also
``sdschat core-demo``) runs the older, self-checking demo of the SDS core alone.

The same building blocks (:func:`plan_demo`, :func:`start_session`,
:func:`stop_session`) drive the tmux end-to-end test.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "DEFAULT_SESSION",
    "DemoPlan",
    "Participant",
    "default_demo_dir",
    "free_port",
    "plan_demo",
    "restart_participant",
    "run_demo",
    "sdschat_command",
    "start_session",
    "stop_session",
    "wait_listening",
]

DEFAULT_SESSION = "sdschat-demo"
HOST = "127.0.0.1"


@dataclass(frozen=True)
class Participant:
    """One TUI of the demo."""

    name: str
    drop_rate: float = 0.0
    drop_seed: int | None = None


DEFAULT_PARTICIPANTS = (
    Participant("alice"),
    Participant("bob"),
    Participant("carol", drop_rate=0.3),
)


@dataclass
class DemoPlan:
    """Commands and directories of one demo session."""

    session: str
    base_dir: Path
    port: int
    channel: str
    relay: list[str]
    participants: dict[str, list[str]] = field(default_factory=dict)

    @property
    def relay_url(self) -> str:
        return f"ws://{HOST}:{self.port}"

    def data_dir(self, name: str) -> Path:
        return self.base_dir / name


def default_demo_dir() -> Path:
    """Where the demo keeps its data directories (persisting between runs)."""
    state = os.environ.get("XDG_STATE_HOME")
    root = Path(state) if state else Path.home() / ".local" / "state"
    return root / "sdschat-demo"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, timeout: float) -> bool:
    """Wait (bounded) until something accepts connections on 127.0.0.1:``port``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:  # bounded by the deadline
        with contextlib.suppress(OSError), socket.create_connection((HOST, port), timeout=0.5):
            return True
        time.sleep(0.1)
    return False


def _passphrase_file(base_dir: Path) -> Path:
    path = base_dir / "passphrase"
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(18) + "\n")
    return path


def plan_demo(
    base_dir: Path,
    *,
    session: str = DEFAULT_SESSION,
    port: int | None = None,
    channel: str = "general",
    participants: Sequence[Participant] = DEFAULT_PARTICIPANTS,
    python: str = sys.executable,
    extra_join_args: Sequence[str] = ("--fast",),
) -> DemoPlan:
    """Directories, passphrase file and commands of a demo (nothing is started)."""
    base_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    secret = _passphrase_file(base_dir)
    port = port or free_port()
    cli = [python, "-m", "app.cli"]
    plan = DemoPlan(
        session=session,
        base_dir=base_dir,
        port=port,
        channel=channel,
        relay=[*cli, "relay", "--host", HOST, "--port", str(port), "--log-format", "text"],
    )
    for p in participants:
        argv = [
            *cli,
            "join",
            channel,
            "--relay",
            plan.relay_url,
            "--data-dir",
            str(plan.data_dir(p.name)),
            "--name",
            p.name,
            "--passphrase-file",
            str(secret),
            *extra_join_args,
        ]
        if p.drop_rate:
            argv += ["--drop-rate", str(p.drop_rate)]
        if p.drop_seed is not None:
            argv += ["--drop-seed", str(p.drop_seed)]
        plan.participants[p.name] = argv
    return plan


def _pane_command(argv: Sequence[str], cwd: Path, label: str) -> str:
    """A shell command for a tmux pane: run ``argv``; on failure keep the pane to show why."""
    cmd = shlex.join(argv)
    return (
        f"cd {shlex.quote(str(cwd))} && {cmd} || "
        f"{{ status=$?; echo; echo {shlex.quote(label + ' exited with status')} $status; "
        "echo 'press Enter to close'; read _; }"
    )


def _tmux(*args: str, tmux: str = "tmux") -> None:
    subprocess.run([tmux, *args], check=True, timeout=30, capture_output=True)


def session_exists(session: str, tmux: str = "tmux") -> bool:
    result = subprocess.run(
        [tmux, "has-session", "-t", f"={session}"], capture_output=True, timeout=30
    )
    return result.returncode == 0


def start_session(
    plan: DemoPlan,
    *,
    tmux: str = "tmux",
    width: int = 240,
    height: int = 50,
    timeout: float = 20.0,
    env: dict[str, str] | None = None,
) -> None:
    """Start the relay, wait until it listens, then the participants' panes (side by side).

    Raises:
        RuntimeError: the relay did not start listening within ``timeout``.
    """
    cwd = Path(__file__).resolve().parent.parent
    extra_env: list[str] = []
    for key, value in (env or {}).items():
        extra_env += ["-e", f"{key}={value}"]
    s = plan.session
    _tmux(
        "new-session",
        "-d",
        "-s",
        s,
        "-n",
        "relay",
        "-x",
        str(width),
        "-y",
        str(height),
        *extra_env,
        _pane_command(plan.relay, cwd, "relay"),
        tmux=tmux,
    )
    # Windows made later take this size until a client attaches (then the client's).
    _tmux("set-option", "-t", s, "default-size", f"{width}x{height}", tmux=tmux)
    if not wait_listening(plan.port, timeout):
        stop_session(s, tmux=tmux)
        raise RuntimeError(f"the relay did not start listening on {HOST}:{plan.port}")
    names = list(plan.participants)
    for i, name in enumerate(names):
        cmd = _pane_command(plan.participants[name], cwd, name)
        if i == 0:
            _tmux("new-window", "-t", s, "-n", "chat", *extra_env, cmd, tmux=tmux)
            _tmux("resize-window", "-t", f"{s}:chat", "-x", str(width), "-y", str(height),
                  tmux=tmux)  # fmt: skip
        else:
            _tmux("split-window", "-t", f"{s}:chat", "-h", *extra_env, cmd, tmux=tmux)
        _tmux("select-pane", "-t", f"{s}:chat.{i}", "-T", name, tmux=tmux)
        _tmux("select-layout", "-t", f"{s}:chat", "even-horizontal", tmux=tmux)
    _tmux("set-option", "-t", s, "pane-border-status", "top", tmux=tmux)
    _tmux("set-option", "-t", s, "pane-border-format", " #{pane_title} ", tmux=tmux)
    _tmux("set-option", "-t", s, "escape-time", "10", tmux=tmux)
    _tmux("select-window", "-t", f"{s}:chat", tmux=tmux)
    _tmux("select-pane", "-t", f"{s}:chat.0", tmux=tmux)
    save_plan(plan)  # for `sdschat demo --restart NAME`


PLAN_FILE = "demo.json"
"""The running session's commands, in the demo's directory (for ``--restart``)."""


def save_plan(plan: DemoPlan) -> Path:
    """Keep ``plan``'s session, port and commands in ``base_dir/demo.json`` (mode 0600;
    it names the passphrase file, never the passphrase)."""
    path = plan.base_dir / PLAN_FILE
    doc = {
        "session": plan.session,
        "port": plan.port,
        "channel": plan.channel,
        "relay": plan.relay,
        "participants": plan.participants,
    }
    tmp = path.with_name(f".{PLAN_FILE}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
    tmp.replace(path)
    return path


def load_plan(base_dir: Path) -> DemoPlan:
    """The plan :func:`save_plan` kept in ``base_dir``.

    Raises:
        ValueError: none there, or unreadable.
    """
    path = base_dir / PLAN_FILE
    try:
        doc = json.loads(path.read_text("utf-8"))
        return DemoPlan(
            session=str(doc["session"]),
            base_dir=base_dir,
            port=int(doc["port"]),
            channel=str(doc["channel"]),
            relay=[str(a) for a in doc["relay"]],
            participants={str(k): [str(a) for a in v] for k, v in doc["participants"].items()},
        )
    except FileNotFoundError:
        raise ValueError(f"no demo was started from {base_dir} (no {PLAN_FILE})") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"cannot read {path}: {exc}") from None


def _panes(window: str, tmux: str) -> dict[str, str]:
    """Pane title -> pane id of ``window``'s panes ({} if there is no such window)."""
    out = subprocess.run(
        [tmux, "list-panes", "-t", window, "-F", "#{pane_id} #{pane_title}"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    panes: dict[str, str] = {}
    for line in out.stdout.splitlines() if out.returncode == 0 else ():
        pane, _, title = line.partition(" ")
        panes[title] = pane
    return panes


def restart_participant(plan: DemoPlan, name: str, *, tmux: str = "tmux") -> str:
    """Open ``name``'s pane again in the running session: a pane where the TUI quit is
    made anew beside the others; one still showing why it failed is run again in place.
    Returns what was done, for the person.

    Raises:
        ValueError: not a participant, the session is not running, or the TUI is still
            running (nothing is changed then).
    """
    argv = plan.participants.get(name)
    if argv is None:
        raise ValueError(
            f"{name!r} is not in this demo; the participants are {', '.join(plan.participants)}"
        )
    s = plan.session
    if not session_exists(s, tmux=tmux):
        raise ValueError(f"no tmux session {s} running: start the demo with `sdschat demo`")
    cwd = Path(__file__).resolve().parent.parent
    cmd = _pane_command(argv, cwd, name)
    window = f"{s}:chat"
    panes = _panes(window, tmux)
    if name in panes:
        pane = panes[name]
        shown = subprocess.run(
            [tmux, "capture-pane", "-p", "-t", pane], capture_output=True, text=True, timeout=30
        ).stdout
        tail = [line for line in shown.splitlines() if line.strip()][-2:]
        failed = len(tail) == 2 and "exited with status" in tail[0] and "press Enter" in tail[1]
        if not failed:  # the pane still runs the TUI (see _pane_command)
            raise ValueError(
                f"{name} is still running (pane {pane}); Ctrl+Q in that pane quits first"
            )
        _tmux("respawn-pane", "-k", "-t", pane, cmd, tmux=tmux)  # it showed why it failed
        _tmux("select-pane", "-t", pane, "-T", name, tmux=tmux)
        return f"{name} started again in the same pane"
    if panes:
        new = [tmux, "split-window", "-t", window, "-h"]
    else:  # everybody quit: the chat window closed with the last pane
        new = [tmux, "new-window", "-t", s, "-n", "chat"]
    made = subprocess.run(
        [*new, "-P", "-F", "#{pane_id}", cmd],
        check=True, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    _tmux("select-pane", "-t", made.stdout.strip(), "-T", name, tmux=tmux)
    _tmux("select-layout", "-t", window, "even-horizontal", tmux=tmux)
    return f"{name} is back in the chat window"


def stop_session(session: str, *, tmux: str = "tmux") -> bool:
    """Kill the demo's tmux session (its relay and TUIs); False if it was not running."""
    result = subprocess.run(
        [tmux, "kill-session", "-t", f"={session}"], capture_output=True, timeout=30
    )
    return result.returncode == 0


def sdschat_command() -> str:
    """How to type ``sdschat`` in this shell: ``sdschat`` when that finds this very
    program on ``PATH``; else its path (``.venv/bin/sdschat`` below the current
    directory, as right after ``make demo``, whose venv is not activated)."""
    here = Path(sys.executable).parent / "sdschat"
    if not here.exists() and Path(sys.argv[0]).name == "sdschat":
        here = Path(sys.argv[0])
    found = shutil.which("sdschat")
    if not here.exists() or (found is not None and os.path.samefile(found, here)):
        return "sdschat"
    absolute = here.absolute()
    try:
        shown = str(absolute.relative_to(Path.cwd()))
    except ValueError:
        shown = str(absolute)
    return shlex.quote(shown)


def run_demo(args: argparse.Namespace) -> int:
    """``sdschat demo`` (see the module docstring); returns the exit status."""
    tmux = shutil.which("tmux")
    session = args.session
    if tmux is None:
        print(
            "sdschat demo: tmux is needed (sudo apt-get install tmux; `make demo` installs it), "
            "or run `sdschat demo --core` for the protocol demo without it",
            file=sys.stderr,
        )
        return 1
    if args.stop:
        if stop_session(session, tmux=tmux):
            print(f"sdschat demo: stopped tmux session {session}")
            return 0
        print(f"sdschat demo: no tmux session {session} running", file=sys.stderr)
        return 1
    attach = f"tmux attach -t {session}"
    stop = f"{sdschat_command()} demo --stop"
    base = Path(args.dir).expanduser() if args.dir else default_demo_dir()
    if args.restart:
        try:
            plan = load_plan(base)
            if plan.session != session:
                raise ValueError(
                    f"the demo in {base} runs as tmux session {plan.session}, not {session}"
                )
            done = restart_participant(plan, args.restart, tmux=tmux)
        except (ValueError, subprocess.SubprocessError, OSError) as exc:
            print(f"sdschat demo: {exc}", file=sys.stderr)
            return 1
        print(f"sdschat demo: {done}: attach with `{attach}`")
        return 0
    if session_exists(session, tmux=tmux):
        print(
            f"sdschat demo is already running: attach with `{attach}` · "
            f"end it with `{stop}`"
        )
        return 0
    if args.fresh and base.exists():
        shutil.rmtree(base)
    plan = plan_demo(base, session=session)
    try:
        start_session(plan, tmux=tmux)
    except (RuntimeError, subprocess.SubprocessError, OSError) as exc:
        print(f"sdschat demo: {exc}", file=sys.stderr)
        return 1
    print(
        f"sdschat demo: relay on {plan.relay_url}, alice, bob and carol (drops 30%) in tmux: "
        f"attach with `{attach}` · Ctrl+Q quits a chat · `{stop}` ends it all"
    )
    if args.attach and sys.stdin.isatty():
        os.execvp(tmux, [tmux, "attach", "-t", session])
    return 0


def add_demo_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``sdschat demo``."""
    p.add_argument(
        "--core",
        action="store_true",
        help="run the SDS core demo instead (in-memory network, no TUI, no tmux)",
    )
    p.add_argument("--stop", action="store_true", help="end a running demo session")
    p.add_argument(
        "--restart",
        default=None,
        metavar="NAME",
        help="open the pane of participant NAME (alice, bob, carol) again after they quit",
    )
    p.add_argument("--attach", action="store_true", help="attach to the session right away")
    p.add_argument("--fresh", action="store_true", help="start with empty data directories")
    p.add_argument(
        "--dir", default=None, help=f"where the demo's data lives (default {default_demo_dir()})"
    )
    p.add_argument("--session", default=DEFAULT_SESSION, help="tmux session name")
    p.add_argument(
        "--messages", type=int, default=20, help="(--core) messages each participant sends"
    )
    p.add_argument("--loss", type=float, default=0.3, help="(--core) fraction of datagrams dropped")
    p.add_argument("--seed", type=int, default=1, help="(--core) random seed")
