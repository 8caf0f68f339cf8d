"""``sdschat sim``: a deterministic, seeded simulation of many SDS participants.

:mod:`app.sim.simulation` runs the real protocol core over the in-memory network in
virtual time. This package imports only :mod:`sds`, :mod:`net.memnet` and
:mod:`storage`, nothing else of :mod:`app` (tests/test_layering.py checks it).
"""

from app.sim.simulation import (
    TRAFFIC_KINDS,
    PartitionSpec,
    SimError,
    SimResult,
    SimSpec,
    add_sim_arguments,
    run_sim,
    run_sim_command,
    sim_config,
    summary_lines,
)

__all__ = [
    "TRAFFIC_KINDS",
    "PartitionSpec",
    "SimError",
    "SimResult",
    "SimSpec",
    "add_sim_arguments",
    "run_sim",
    "run_sim_command",
    "sim_config",
    "summary_lines",
]
