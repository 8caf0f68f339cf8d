"""Config: js-waku defaults, derived ack threshold, validation."""

from __future__ import annotations

import pytest

import sds


def test_waku_profile_equals_js_waku() -> None:
    """PROTOCOL.md "js-waku defaults worth knowing" and spec "Default Configuration
    Values": sds.Config.waku() is causal history 200, filter 10,000 / 0.001, 2
    possible-ack hits; its timings (the defaults') are js-waku's: resend every 30 s
    up to 10 attempts, sync within 30 s, store query every 10 s, SDS-R T_min 30 s /
    T_max 120 s, 3 repair requests per message."""
    for c in (sds.Config.waku(), sds.Config.profile("waku")):
        assert c.causal_history_size == 200
        assert c.causal_history_floor is None
        assert c.bloom_capacity == 10_000
        assert c.bloom_error_rate == 0.001
        assert c.ack_threshold == 2
        assert c.resend_unacknowledged_ms == 30_000
        assert c.max_resend_attempts == 10
        assert c.sync_interval_ms == 30_000
        assert c.sweep_interval_ms == 10_000
        assert c.repair_t_min_ms == 30_000
        assert c.repair_t_max_ms == 120_000
        assert c.repair_requests_per_message == 3
        assert c.repair_buffer_size == 1_000
        assert c.repair_response_groups == 1


def test_default_profile_is_leaner_than_waku() -> None:
    """docs/profiles.md: the default sizes come from bench/profile_study.py: a shorter
    history and a smaller filter than js-waku's, the same 2-sender ack threshold."""
    d, w = sds.Config(), sds.Config.waku()
    assert sds.Config.profile("default") == d
    assert d.causal_history_size < w.causal_history_size
    assert d.bloom_capacity < w.bloom_capacity
    assert d.ack_threshold == w.ack_threshold == 2
    assert sds.Config.waku(causal_history_size=5).causal_history_size == 5
    with pytest.raises(ValueError, match=r"unknown protocol profile 'nope'.*default, waku"):
        sds.Config.profile("nope")


def test_possibly_acknowledged_period_is_distinct_and_longer() -> None:
    """Spec "Periodic Outgoing Buffer Sweep": distinct resend periods, unacknowledged
    messages prioritised (shorter period)."""
    c = sds.Config()
    assert c.resend_possibly_acknowledged_ms > c.resend_unacknowledged_ms


@pytest.mark.parametrize(
    ("rate", "certainty", "expected"),
    [(0.001, 1e-6, 2), (0.01, 1e-6, 3), (0.1, 1e-6, 6), (0.001, 1e-9, 3), (0.001, 1e-3, 1)],
)
def test_ack_threshold_derived_from_filter_rate(
    rate: float, certainty: float, expected: int
) -> None:
    """PROTOCOL.md "Acknowledgements": the threshold is derived from the filter's
    false-positive rate: smallest t with rate**t <= certainty (2 at 0.001, 3 at 0.01)."""
    c = sds.Config(bloom_error_rate=rate, ack_certainty=certainty)
    assert c.ack_threshold == expected
    t = c.ack_threshold
    assert rate**t <= certainty * (1 + 1e-9)
    assert t == 1 or rate ** (t - 1) > certainty


def test_ack_threshold_override() -> None:
    """PROTOCOL.md "Acknowledgements": a fixed threshold may replace the derived one."""
    assert sds.Config(ack_threshold_override=5).ack_threshold == 5


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"causal_history_size": 0}, "causal_history_size must be >= 1"),
        ({"bloom_capacity": 0}, "bloom_capacity must be >= 1"),
        ({"bloom_error_rate": 0.0}, "bloom_error_rate must be in (0, 1)"),
        ({"bloom_error_rate": 1.5}, "bloom_error_rate must be in (0, 1)"),
        ({"ack_certainty": 1.0}, "ack_certainty must be in (0, 1)"),
        ({"ack_threshold_override": 0}, "ack_threshold_override must be >= 1"),
        ({"resend_unacknowledged_ms": 0}, "resend_unacknowledged_ms must be > 0"),
        ({"sync_interval_ms": -5}, "sync_interval_ms must be > 0"),
        ({"max_resend_attempts": -1}, "max_resend_attempts must be >= 0"),
        ({"lost_timeout_ms": -1}, "lost_timeout_ms must be >= 0"),
        ({"repair_t_min_ms": 120_000}, "repair_t_min_ms < repair_t_max_ms"),
        ({"repair_response_groups": 0}, "repair_response_groups must be >= 1"),
        ({"outgoing_buffer_cap": 0}, "outgoing_buffer_cap must be >= 1"),
        ({"incoming_buffer_cap": 0}, "incoming_buffer_cap must be >= 1"),
        ({"max_missing": 0}, "max_missing must be >= 1"),
        ({"repair_cache_size": -5}, "repair_cache_size must be >= 0"),
        ({"causal_history_size": 200, "log_window": 100},
         "log_window must be >= causal_history_size"),
        ({"causal_history_floor": -1}, "causal_history_floor must be >= 0"),
    ],
)
def test_invalid_values_rejected_with_clear_message(changes: dict, needle: str) -> None:
    """Issue 2 "sds.Config (a documented dataclass)": invalid sizes/timings are refused
    with a ValueError naming the field and the rule."""
    with pytest.raises(ValueError) as info:
        sds.Config(**changes)
    assert needle in str(info.value)


def test_all_problems_reported_at_once() -> None:
    """Issue 2: a config with several errors names all of them."""
    with pytest.raises(ValueError) as info:
        sds.Config(causal_history_size=0, sync_interval_ms=0)
    assert "causal_history_size" in str(info.value)
    assert "sync_interval_ms" in str(info.value)


def test_with_changes_validates() -> None:
    """Issue 2: changed copies are validated again."""
    c = sds.Config()
    assert c.with_changes(causal_history_size=2).causal_history_size == 2
    with pytest.raises(ValueError):
        c.with_changes(causal_history_size=0)


def test_dict_round_trip() -> None:
    """Issue 2: Config persists as a plain dict and comes back equal."""
    c = sds.Config(causal_history_size=7, lost_timeout_ms=0, repair_enabled=False)
    assert sds.Config.from_dict(c.to_dict()) == c


def test_from_dict_rejects_unknown_keys() -> None:
    """Issue 2: from_dict refuses unknown keys, naming them (typos do not pass silently)."""
    with pytest.raises(ValueError, match="causal_histroy_size"):
        sds.Config.from_dict({"causal_histroy_size": 3})


def test_config_is_frozen() -> None:
    """Issue 2 "a documented dataclass": a Config cannot change under a running channel."""
    c = sds.Config()
    with pytest.raises(AttributeError):
        c.causal_history_size = 3  # type: ignore[misc]


def test_fast_config_scales_periods() -> None:
    """Issue 2: Config.fast gives second-scale timings that still validate."""
    c = sds.Config.fast(1_000)
    assert c.resend_unacknowledged_ms == 2_000
    assert c.repair_t_min_ms < c.repair_t_max_ms
    assert c.causal_history_size == sds.Config().causal_history_size
    assert sds.Config.waku().with_fast_timings(1_000).resend_unacknowledged_ms == 2_000
