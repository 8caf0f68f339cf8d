"""The members modes of the benchmarks on tiny sizes: what their figures rest on holds."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from app.members.device_copy import forget_home
from tests.procs import load_bench


def test_node_receive_members_mode_reads_every_line_in_both_kinds(tmp_path: Path) -> None:
    """bench/node_receive.py --members: a real node writes lines in a passphrase and a
    members channel; a fresh copy of the receiver's data directory reads every line
    of each."""
    nr = load_bench("node_receive")
    from net.channel_key import TEST_KDF, derive_channel_key

    async def main() -> None:
        built = await nr.build_channels(tmp_path, 5)
        for kind in nr.KINDS:
            envs, lines = built[kind]
            assert sum(lines) == 5 and len(envs) >= 5
            d = tmp_path / f"run-{kind}"
            shutil.copytree(tmp_path / "bob", d)
            forget_home(d)  # the template never runs again
            key = (derive_channel_key(*nr.PASSPHRASE_KEY, params=TEST_KDF)
                   if kind == "passphrase" else nr.MEMBERS)  # fmt: skip
            wall, cpu = await nr.receive_all(d, key, envs, 5)
            assert wall > 0 and cpu > 0

    asyncio.run(asyncio.wait_for(main(), 120))


def test_members_cost_large_removal_goes_in_parts_and_both_members_follow(capsys) -> None:  # type: ignore[no-untyped-def]
    """bench/members_cost.py --large on 700 members: 3 envelopes (2 parts of 300,
    then the remove), both real members on the new key."""
    mc = load_bench("members_cost")
    mc.large_removal(700)
    out = capsys.readouterr().out
    assert "3 envelopes (2 EpochKeys parts, then the remove)" in out
    assert "2 of 2 real members on the new key" in out
