"""``sdschat relay`` flags, structured log formats, periodic stats."""

from __future__ import annotations

import io
import json

import pytest
from net_helpers import run, start_relay

from app.cli import build_parser, main
from net.relay_config import RelayConfig, config_from_args
from net.relay_log import RelayLogger


def test_relay_flags_map_to_config() -> None:
    args = build_parser().parse_args(
        [
            "relay", "--host", "127.0.0.1", "--port", "0", "--max-clients", "7",
            "--max-frame", "9999", "--rate", "12.5", "--burst", "30", "--queue", "9",
            "--max-topics", "3", "--log-format", "text", "--stats-interval", "0",
        ]
    )  # fmt: skip
    cfg = config_from_args(args)
    assert cfg == RelayConfig(
        host="127.0.0.1", port=0, max_clients=7, max_frame=9999, rate=12.5, burst=30,
        queue=9, max_topics=3, log_format="text", stats_interval=0,
    )  # fmt: skip
    defaults = config_from_args(build_parser().parse_args(["relay"]))
    assert defaults == RelayConfig()
    assert defaults.host == "127.0.0.1"


def test_invalid_flag_values_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["relay", "--queue", "0", "--port", "0"]) == 2
    assert "queue must be at least 1" in capsys.readouterr().err
    # NaN passed "<= 0" checks and turned rate limiting off; infinities are no better
    for flag, value in (("--rate", "nan"), ("--rate", "inf"), ("--stats-interval", "nan")):
        assert main(["relay", flag, value, "--port", "0"]) == 2
        assert "must be a finite number" in capsys.readouterr().err
    assert main(["relay", "--stats-interval", "-1", "--port", "0"]) == 2
    assert "stats_interval must be >= 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build_parser().parse_args(["relay", "--log-format", "xml"])


def test_json_log_lines() -> None:
    out = io.StringIO()
    log = RelayLogger("json", out)
    log.info("relay_listening", port=8765, topic=b"\x01\x02", nested={"a": [b"\xff"]})
    log.debug("hidden")  # below the default level
    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert list(record)[:3] == ["ts", "level", "event"]
    assert record["ts"].endswith("Z") and "T" in record["ts"]
    assert record["level"] == "info" and record["event"] == "relay_listening"
    assert record["port"] == 8765 and record["topic"] == "0102"
    assert record["nested"] == {"a": ["ff"]}


def test_text_log_lines() -> None:
    out = io.StringIO()
    log = RelayLogger("text", out, level="debug")
    log.warning("connection_dropped", reason="slow_consumer", detail="two words", n=3)
    line = out.getvalue().strip()
    assert " warning connection_dropped " in line
    assert "reason=slow_consumer" in line and 'detail="two words"' in line and "n=3" in line
    with pytest.raises(ValueError):
        RelayLogger("xml")  # type: ignore[arg-type]


def test_stats_are_logged_periodically() -> None:
    async def main_() -> None:
        server, log = await start_relay(stats_interval=0.05)
        try:
            first = await log.wait_for("relay_stats")
            assert "final" not in first
            assert {"connections", "published", "deliveries", "dropped"} <= set(first)
        finally:
            await server.close()
        assert log.events("relay_stats")[-1]["final"] is True

    run(main_())
