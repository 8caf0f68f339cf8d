"""Small parts of app/: content format, command parsing, settings, passphrase files, transports."""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from app_helpers import key, run

import sds
from app.chat.content import decode_content
from app.chat.lines import ChatContent, encode_content, visible
from app.commands.line import Command, parse_line
from app.launch.passphrase import PassphraseFileError, read_passphrase_file
from app.launch.settings import (
    add_join_arguments,
    default_config_path,
    load_config_file,
    settings_from_args,
)
from app.node.events import Delivered, OwnMessage, event_to_json
from app.node.transport import LossyTransport, MemoryHub
from net.envelope import seal
from net.identity import Identity


def test_content_round_trip_and_foreign_content() -> None:
    raw = encode_content("héllo", "alice\x1b[31m", "me")
    # a claimed name keeps an escape visibly (app/names.py clean_name), never restyles
    assert decode_content(raw) == ChatContent("héllo", "alice\\x1b[31m", "me")
    assert decode_content(b"plain text") == ChatContent("plain text", None, "raw")
    assert decode_content(b"\xfe\xff").kind == "raw"
    # 0xFF starts typed content (app/chat/content.py): a malformed one is shown as unsupported
    assert decode_content(b"\xff\xfe").kind == "unsupported"
    assert decode_content(b'{"v":1,"text":"t","kind":"weird"}') == ChatContent("t", None, "msg")
    assert decode_content(b"[" * 100_000).kind == "raw"  # deep nesting: no crash
    with pytest.raises(ValueError):
        encode_content("", "a")
    with pytest.raises(ValueError):
        encode_content("x", "a", "shout")
    assert decode_content(encode_content("x", "n" * 500)).name == "n" * 64


def test_visible_escapes_what_would_steer_a_terminal() -> None:
    assert visible("a\x1b[2J\x00\x7f\x9b\u202e\u2066b\tc\r\nd") == (
        "a\\x1b[2J\\x00\\x7f\\x9b\\u202e\\u2066b\tc\\x0d\\x0ad"
    )
    assert visible("one\ntwo\x1b", newlines=True) == "one\ntwo\\x1b"
    family = "\U0001f469\u200d\U0001f467 caf\u00e9 \u4f60\u597d"  # ZWJ emoji: not printable
    assert visible(family) == family and visible("plain") == "plain"


def test_headless_json_lines_keep_the_text_and_hide_terminal_controls() -> None:
    import io
    import json

    from app.headless.run import JsonLines

    out = io.StringIO()
    text = "a\x1b[2J \x9b31m \u202eb\u2066 é 😀"
    JsonLines(out).write({"event": "delivered", "text": text})
    JsonLines(out).write({"event": "big", "n": 2**70})  # orjson refuses: the json fallback
    first, second = out.getvalue().splitlines()
    assert json.loads(first)["text"] == text and json.loads(second)["n"] == 2**70
    assert not any(c in first for c in "\x1b\x9b\u202e\u2066") and "é 😀" in first


def test_parse_line() -> None:
    assert parse_line("hello") == Command("say", "hello")
    assert parse_line("  \n") is None
    assert parse_line("//slash") == Command("say", "/slash")
    assert parse_line("/me waves\n") == Command("me", "waves")
    assert parse_line("/JOIN dev") == Command("join", "dev")
    assert parse_line("/leave") == Command("leave", "")
    assert parse_line("/join").name == "error"
    assert parse_line("/frobnicate x").name == "error"
    assert parse_line("/quit") == Command("quit", "")


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_join_arguments(p)
    return p.parse_args(argv)


def test_settings_precedence(tmp_path: Path) -> None:
    s = settings_from_args(_parse(["room"]))
    assert s.config == sds.Config() and s.drop_rate == 0 and s.relay == "ws://127.0.0.1:8765"
    s = settings_from_args(_parse(["room", "--fast"]))
    assert s.config == sds.Config.fast(1000)
    cfg = tmp_path / "n.toml"
    cfg.write_text("fast = true\ndrop_rate = 0.1\n[protocol]\nsync_interval_ms = 1234\n")
    s = settings_from_args(
        _parse(
            [
                "room",
                "--config",
                str(cfg),
                "--resend-ms",
                "777",
                "--lost-timeout-ms",
                "9000",
                "--repair-tmin-ms",
                "10",
                "--repair-tmax-ms",
                "20",
                "--sweep-ms",
                "30",
            ]
        )
    )
    c = s.config
    assert c.sync_interval_ms == 1234 and c.resend_unacknowledged_ms == 777
    assert c.resend_possibly_acknowledged_ms == 1554 and c.lost_timeout_ms == 9000
    assert (c.repair_t_min_ms, c.repair_t_max_ms, c.sweep_interval_ms) == (10, 20, 30)
    assert s.drop_rate == 0.1
    assert (
        settings_from_args(_parse(["room", "--config", str(cfg), "--drop-rate", "0"])).drop_rate
        == 0
    )


def test_profile_flag_and_config_key(tmp_path: Path) -> None:
    """``--profile waku`` and the file's ``profile`` key pick sds.Config.waku() (js-waku's
    sizes); the flag wins over the file, [protocol] keys and --fast still apply on top."""
    assert settings_from_args(_parse(["room", "--profile", "waku"])).config == sds.Config.waku()
    assert settings_from_args(_parse(["room", "--profile", "default"])).config == sds.Config()
    cfg = tmp_path / "w.toml"
    cfg.write_text('profile = "waku"\nfast = true\n[protocol]\nsync_interval_ms = 1234\n')
    c = settings_from_args(_parse(["room", "--config", str(cfg)])).config
    assert c == sds.Config.waku().with_fast_timings(1000).with_changes(sync_interval_ms=1234)
    c = settings_from_args(_parse(["room", "--config", str(cfg), "--profile", "default"])).config
    assert c.causal_history_size == sds.Config().causal_history_size
    bad = tmp_path / "bad.toml"
    bad.write_text('profile = "nope"\n')
    with pytest.raises(ValueError, match="unknown protocol profile 'nope'"):
        settings_from_args(_parse(["room", "--config", str(bad)]))
    with pytest.raises(SystemExit):
        _parse(["room", "--profile", "nope"])


@pytest.mark.parametrize(
    ("text", "flags", "message"),
    [
        ("bogus = 1\n", [], "unknown keys bogus"),
        ("[protocol]\nresend_ms = 1\n", [], "unknown [protocol] keys"),
        ("not toml [", [], "not valid TOML"),
        ("", ["--drop-rate", "1.5"], "drop-rate"),
        ("", ["--repair-tmin-ms", "50", "--repair-tmax-ms", "10"], "repair_t_min_ms"),
        ("", ["--relay", "http://x"], "ws://"),
        # every channel name is checked before any is joined (and stored)
        ("", ["--channel", ""], "a channel name must not be empty"),
        ("", ["--channel", "x" * 101], "at most 100 characters, got 101"),
        ("", ["--channel", "a\x1b[2Jb"], "must not hold control characters"),
        # wrong types in the file: a clear error naming the key, not a traceback later
        ("drop_rate = [1]\n", [], "drop_rate must be a number, got [1]"),
        ("name = 123\n", [], "name must be a string, got 123"),
        ("fast = 1\n", [], "fast must be a boolean"),
        ('fast_scale_ms = "abc"\n', [], "fast_scale_ms must be an integer"),
        ("state_save_ms = 1.5\n", [], "state_save_ms must be an integer"),
        ('[protocol]\nresend_unacknowledged_ms = "x"\n', [],
         "[protocol] resend_unacknowledged_ms must be an integer, got 'x'"),
        ("[protocol]\nrepair_enabled = 1\n", [], "repair_enabled must be a boolean"),
        # URLs that could never connect were retried forever: usage errors now
        ("", ["--relay", "ws://127.0.0.1:99999"], "--relay 'ws://127.0.0.1:99999' is not a valid"),
        ("", ["--relay", "ws://[::1"], "not a valid URL"),
        ("", ["--relay", "ws://"], "names no host"),
        ("", ["--relay", ""], "--relay must be a ws://"),
        ("", ["--relay", "ws://h:0"], "port 0"),
        ('relay = "ws://h:123456"\n', [], "relay (config file)"),
        ("relay = 5\n", [], "relay must be a string or list of strings, got 5"),
    ],
)
def test_settings_errors(tmp_path: Path, text: str, flags: list[str], message: str) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    with pytest.raises(ValueError, match=re.escape(message)):
        settings_from_args(_parse(["room", "--config", str(cfg), *flags]))


@pytest.mark.parametrize(
    ("url", "message"),
    [("notaurl", "--store must be"), ("ws://h:99999", "--store 'ws://h:99999' is not a valid")],
)
def test_store_url_errors(url: str, message: str) -> None:
    args = _parse(["room", "--relay", "ws://h:1"])
    args.store = url  # --store is added with the LAN flags (net/lan/flags.py)
    with pytest.raises(ValueError, match=re.escape(message)):
        settings_from_args(args)


def test_config_file_missing(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot read"):
        load_config_file(tmp_path / "absent.toml")


def test_passphrase_file(tmp_path: Path) -> None:
    f = tmp_path / "pw"
    f.write_bytes(b"s3cret words\r\nignored\n")
    assert read_passphrase_file(f) == b"s3cret words"
    f.write_bytes(b"\n")
    with pytest.raises(PassphraseFileError, match="empty"):
        read_passphrase_file(f)
    with pytest.raises(PassphraseFileError, match="cannot read"):
        read_passphrase_file(tmp_path / "absent")
    f.write_bytes(b"x" * 70_000)
    with pytest.raises(PassphraseFileError, match="larger"):
        read_passphrase_file(f)


def test_event_json_names_and_fields() -> None:
    d = event_to_json(Delivered("c", "m", "s", "alice", "msg", "hi", 5, 0))
    assert d["event"] == "delivered" and d["sender"] == "s" and d["text"] == "hi"
    o = event_to_json(OwnMessage("c", "queued", local_id=3, text="x"))
    assert (o["event"], o["state"], o["local_id"]) == ("own", "queued", 3)


def test_lossy_transport_counts() -> None:
    import asyncio

    async def main() -> tuple[int, int, int]:
        hub = MemoryHub()
        k = key()
        ident = Identity.generate()
        got: list[bytes] = []

        async def on_env(e: bytes) -> None:
            got.append(e)

        sender = LossyTransport(hub.transport(), 0.3, random.Random(1))
        receiver = LossyTransport(hub.transport(), 0.3, random.Random(2))
        for t in (sender, receiver):
            await t.subscribe([k.topic])
            t.start(on_env, lambda s: None)
        from sds import sds_pb2

        for i in range(1000):
            data = sds_pb2.SdsMessage(
                sender_id=ident.sender_id, message_id=str(i), channel_id="general", content=b"x"
            ).SerializeToString()
            assert await sender.publish(seal(data, ident, k))
        await asyncio.sleep(0.2)
        return sender.dropped_out, receiver.dropped_in, len(got)

    out_drops, in_drops, got = run(main())
    assert 250 < out_drops < 350
    assert got == 1000 - out_drops - in_drops
    assert 0.2 < in_drops / (1000 - out_drops) < 0.4


def test_unknown_flag_shows_the_commands_own_usage(capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli import main

    with pytest.raises(SystemExit) as info:
        main(["join", "general", "--bogus"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "usage: sdschat join" in err and "unrecognized arguments: --bogus" in err
    with pytest.raises(SystemExit):
        main(["--bogus"])
    assert "usage: sdschat [-h]" in capsys.readouterr().err


def test_the_default_config_file_is_read_unless_no_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --config, $XDG_CONFIG_HOME/sdschat/config.toml is read when it exists;
    --no-config skips it; a bad one is reported with its path."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert settings_from_args(_parse(["room"])).config == sds.Config()  # no file: defaults
    path = tmp_path / "sdschat" / "config.toml"
    path.parent.mkdir()
    path.write_text("[protocol]\nsync_interval_ms = 4321\n")
    args = _parse(["room"])
    assert settings_from_args(args).config.sync_interval_ms == 4321
    assert args.config == str(path)  # the TUI's keymap and the transport read it too
    assert settings_from_args(_parse(["room", "--no-config"])).config == sds.Config()
    other = tmp_path / "other.toml"
    other.write_text("[protocol]\nsync_interval_ms = 999\n")
    given = settings_from_args(_parse(["room", "--config", str(other)]))
    assert given.config.sync_interval_ms == 999
    with pytest.raises(ValueError, match="cannot be used together"):
        settings_from_args(_parse(["room", "--config", str(other), "--no-config"]))
    path.write_text("sync = 1\n")
    with pytest.raises(ValueError, match=f"config file {path}: unknown keys sync"):
        settings_from_args(_parse(["room"]))
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/dir")  # not absolute: ignored (XDG spec)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_config_path() == tmp_path / "home" / ".config" / "sdschat" / "config.toml"


def test_a_headless_node_takes_its_name_from_the_default_config_file(tmp_path: Path) -> None:
    """The real command: ``sdschat join`` without --name or --config uses the name in
    ~/.config/sdschat/config.toml (here under XDG_CONFIG_HOME)."""
    conf = tmp_path / "xdg" / "sdschat"
    conf.mkdir(parents=True)
    (conf / "config.toml").write_text('name = "zed"\n')
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    argv = [sys.executable, "-m", "app.cli", "join", "room", "--headless", "--fast",
            "--relay", "ws://127.0.0.1:9"]
    root = Path(__file__).resolve().parents[2]
    for extra, name in (([], "zed"), (["--no-config"], None)):
        data = ["--data-dir", str(tmp_path / f"d{len(extra)}")]  # a data dir keeps its name
        p = subprocess.Popen([*argv, *data, *extra], cwd=root, env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            assert p.stdout is not None
            ready = None
            for _ in range(50):
                line = p.stdout.readline()
                if not line:
                    break
                ev = json.loads(line)
                if ev.get("event") == "ready":
                    ready = ev
                    break
            assert ready is not None, p.stderr.read() if p.stderr else ""
            if name is None:
                assert ready["name"] != "zed"
            else:
                assert ready["name"] == name
        finally:
            assert p.stdin is not None
            p.stdin.close()  # end of input: the node closes
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(30)
