"""Snapshot tests of the main screens (pytest-textual-snapshot; SVGs in ``__snapshots__``).

Deterministic: fixed identities, frozen clocks (times read 00:00 UTC and no
protocol timer fires), seeded ids, fixed terminal size (see ``scenarios.py``).
After an intended change of the UI: ``pytest tests/tui/test_tui_snapshots.py
--snapshot-update``, look at the SVGs, commit them, and regenerate the
README's screenshots with ``python tests/tui/scenarios.py docs/screenshots``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from scenarios import (
    SNAP_SIZE,
    conversation,
    error_screen,
    files,
    formatting,
    help_screen,
    main_screen,
    new_line,
    search_all_screen,
    search_screen,
    typed,
)

pytestmark = pytest.mark.timeout(180)


def test_chat_dark(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    app, before = conversation(tmp_path)
    assert snap_compare(app, terminal_size=SNAP_SIZE, run_before=before)


def test_chat_light(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    app, before = conversation(tmp_path, theme="light")
    assert snap_compare(app, terminal_size=SNAP_SIZE, run_before=before)


def test_unread_line(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    app, before = new_line(tmp_path)
    assert snap_compare(app, terminal_size=SNAP_SIZE, run_before=before)


def test_help(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    app, before = help_screen(tmp_path)
    assert snap_compare(app, terminal_size=SNAP_SIZE, run_before=before)


def test_search(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    app, before = search_screen(tmp_path)
    assert snap_compare(app, terminal_size=SNAP_SIZE, run_before=before)


def test_search_all(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    app, before = search_all_screen(tmp_path)
    assert snap_compare(app, terminal_size=SNAP_SIZE, run_before=before)


def test_search_80_columns(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The find bar and the all-channel results in the narrowest supported pane."""
    app, before = search_screen(tmp_path)
    assert snap_compare(app, terminal_size=(80, 24), run_before=before)


def test_search_all_80_columns(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    app, before = search_all_screen(tmp_path)
    assert snap_compare(app, terminal_size=(80, 24), run_before=before)


@pytest.mark.parametrize(("width", "theme"), [(80, "dark"), (120, "light")])
def test_replies_reactions_edits_80_and_120(  # type: ignore[no-untyped-def]
    snap_compare, tmp_path: Path, width: int, theme: str
) -> None:
    app, before = typed(tmp_path, theme=theme)
    assert snap_compare(app, terminal_size=(width, 24), run_before=before)


@pytest.mark.parametrize(("width", "theme"), [(80, "dark"), (120, "light")])
def test_file_progress_80_and_120(  # type: ignore[no-untyped-def]
    snap_compare, tmp_path: Path, width: int, theme: str
) -> None:
    app, before = files(tmp_path, theme=theme)
    assert snap_compare(app, terminal_size=(width, 24), run_before=before)


def test_error(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    app, before = error_screen(tmp_path)
    assert snap_compare(app, terminal_size=SNAP_SIZE, run_before=before)


@pytest.mark.parametrize("theme", ["dark", "light"])
@pytest.mark.parametrize("width", [80, 120])
def test_main_screen_80_and_120_dark_and_light(  # type: ignore[no-untyped-def]
    snap_compare, tmp_path: Path, width: int, theme: str
) -> None:
    """Day separators (yesterday's with the year), a reply, reactions, an edit, a
    deletion, a file line and a "↺ recovered" mark, in both widths and themes."""
    app, before = main_screen(tmp_path, theme=theme)
    assert snap_compare(app, terminal_size=(width, 30), run_before=before)


@pytest.mark.parametrize("theme", ["dark", "light"])
def test_formatting_notify_marks_bottom_anchored_and_shared_names(  # type: ignore[no-untyped-def]
    snap_compare, tmp_path: Path, theme: str
) -> None:
    """Issue 27: **bold**, _italic_, `code` and a code block drawn formatted; #random
    marked ⊙ (mentions only) and #ops ⊘ (muted, no unread count); the three lines at
    the bottom of the log; two members called bob, each with its fingerprint."""
    app, before = formatting(tmp_path, theme=theme)
    assert snap_compare(app, terminal_size=SNAP_SIZE, run_before=before)
