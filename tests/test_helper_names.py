"""Helper modules of the test folders have names no other folder uses.

pytest puts each test folder on ``sys.path`` (rootdir-relative imports: there is no
``__init__.py``), so two folders' ``netns.py`` are one module for the whole run: the
first imported shadows the other, and the tests of the second folder fail to import
only when both folders run in one process (as ``make test`` runs them).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_no_two_test_folders_have_a_helper_module_of_one_name() -> None:
    folders: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("*.py"):
        if path.name.startswith("test_") or path.name in ("conftest.py", "__init__.py"):
            continue
        folders[path.stem].append(str(path.parent.relative_to(TESTS)))
    assert {name: where for name, where in folders.items() if len(where) > 1} == {}
