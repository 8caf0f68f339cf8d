"""The marks after a message's text ((edited), ↺ recovered, …) stay whole when it wraps
(found by the tmux end-to-end test at 80 columns: "↺" ended one line, "recovered"
began the next)."""

from __future__ import annotations

import pytest
from rich.console import Console

from app.tui.model import Row
from app.tui.render import palette, row_height, row_lines

BOB = "b" * 32
TEXT = "hello from alice, edited"


def lines(row: Row, width: int) -> list[str]:
    return [t.plain.rstrip() for t in row_lines(row, width, Console(), palette(True))]


@pytest.mark.parametrize("width", range(30, 90))
@pytest.mark.parametrize(
    ("flags", "marks"),
    [
        ({"recovered": True}, ["↺ recovered"]),
        ({"after_lost": True}, ["↺ recovered after it was reported lost"]),
        ({"recovered": True, "edited": True}, ["(edited)", "↺ recovered"]),
        ({"own_state": "failed"}, ["not delivered · Ctrl+R retries"]),
    ],
)
def test_marks_are_never_split_by_wrapping(
    width: int, flags: dict[str, object], marks: list[str]
) -> None:
    row = Row((1, "m1"), BOB, "bob", "msg", TEXT, 0, message_id="m1", **flags)  # type: ignore[arg-type]
    shown = lines(row, width)
    room = width - (shown[0].index("│ ") + 2)  # the width of the message's column
    for mark in marks:
        if len(mark) <= room:  # (a mark wider than the column has to be folded)
            assert any(mark in line for line in shown), (mark, shown)
    column = " ".join(line.split("│ ", 1)[1] for line in shown)
    assert column.startswith(TEXT)
    known = row_height(row, width, palette(True))
    assert known is None or known == len(shown)


def test_marks_follow_the_text_on_its_line_when_they_fit() -> None:
    row = Row((1, "m1"), BOB, "bob", "msg", TEXT, 0, message_id="m1", recovered=True)
    assert lines(row, 120)[-1].endswith(f"{TEXT}  ↺ recovered")
    assert len(lines(row, 120)) == 1
