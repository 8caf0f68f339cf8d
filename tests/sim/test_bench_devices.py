"""bench/devices_cost.py on tiny shapes: what its figures rest on holds."""

from __future__ import annotations

from tests.procs import load_bench


def test_devices_cost_counts_a_device_as_a_sender_and_a_person_as_its_devices() -> None:
    dc = load_bench("devices_cost")
    rows = dc.small(4, 20, 0.0, 1)
    assert [r["devices"] for r in rows] == [1, 2, 3]
    # one person with D devices is 3 + D SDS senders, each of which holds every line
    assert [r["participants"] for r in rows] == [4, 5, 6]
    assert [r["holding_every_line"] for r in rows] == [["4/4"], ["5/5"], ["6/6"]]
    for r in rows:
        assert r["wire_bytes_per_line"] > 0 and r["device_down_bytes_per_line"] > 0
        # the person downloads a copy per device
        assert r["person_down_bytes_per_line"] == r["device_down_bytes_per_line"] * r["devices"]
        # latencies come from the run's own events: sent before delivered
        assert 0 < r["delivery_p50_ms"] <= r["delivery_p99_ms"]
    big = dc.large(3, 10, 0.0, 1)
    assert [r["participants"] for r in big] == [3, 6]
