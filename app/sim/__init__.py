"""``sdschat sim``: a deterministic, seeded simulation of many SDS participants.

:mod:`app.sim.simulation` runs the real protocol core over the in-memory network in
virtual time; this package re-exports its public names (its ``__all__``). It imports only
:mod:`sds`, :mod:`net.memnet` and :mod:`storage`, nothing else of :mod:`app`
(tests/test_layering.py checks it).
"""

from app.sim.simulation import *  # noqa: F403  (the public names, one list: simulation.__all__)
from app.sim.simulation import __all__ as __all__
