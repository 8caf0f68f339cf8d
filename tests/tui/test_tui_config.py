"""Keys and colours from the config file's ``[keys]`` and ``[colours]`` tables: used by
the running app (keys, help screen, log colours); a bad entry is a clear error at
start, naming the entry and what is allowed, and nothing is opened or created."""

from __future__ import annotations

import asyncio
import io
import re
from pathlib import Path

import pytest
from rich.color import Color
from rich.console import Console
from tui_helpers import SIZE, T, screen_text, tui, wait_until

from app.cli import main
from app.launch.exits import EXIT_USAGE
from app.node.transport import MemoryHub
from app.tui.config import ACTIONS, tui_config
from app.tui.render import palette
from app.tui.screens.dialogs import HelpScreen
from app.tui.widgets.find_bar import FindBar
from app.tui.widgets.message_log import MessageLog

pytestmark = pytest.mark.timeout(120)


async def test_keys_and_colours_from_the_config_file_are_used(tmp_path: Path) -> None:
    config = tui_config(
        {
            "keys": {"search": "f5", "theme": ["ctrl+t", "f6"], "help": "alt+h"},
            "colours": {"mention": "#ff0000", "dark": {"selected": "#123456"}},
        }
    )
    app = tui(tmp_path / "alice", MemoryHub().transport(), tui_config=config)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await asyncio.wait_for(app.ready.wait(), T(20))
            bar = app.chat.query_one(FindBar)
            await pilot.press("ctrl+f")  # not the search key any more
            await pilot.pause()
            assert not bar.display
            await pilot.press("f5")
            await pilot.pause()
            assert bar.display
            await pilot.press("escape")
            dark = app.current_theme.dark
            await pilot.press("ctrl+t")  # theme: both keys
            await pilot.pause()
            assert app.current_theme.dark != dark
            await pilot.press("f6")
            await pilot.pause()
            assert app.current_theme.dark == dark
            await pilot.press("f1")  # help's old key: nothing
            await pilot.pause()
            assert not isinstance(app.screen, HelpScreen)
            await pilot.press("alt+h")
            await wait_until(lambda: isinstance(app.screen, HelpScreen), what="help")
            await pilot.pause()
            console = Console(width=100, record=True, file=io.StringIO())
            console.print(app.screen.body)  # type: ignore[attr-defined]
            shown = console.export_text()
            # the help says the keys in use
            assert re.search(r"F5 +find as you type", shown)
            assert re.search(r"Ctrl\+T, F6 +dark / light theme", shown)
            assert "Alt+H help" in screen_text(app)  # and the status bar
            await pilot.press("escape")
            # the log's colours
            log = app.chat.query_one(MessageLog)
            pal = log._pal
            assert pal.dark
            assert pal.mention_word.color == Color.parse("#ff0000")
            assert pal.mention_word.bold  # the rest of the style stays
            assert pal.selected.bgcolor == Color.parse("#123456")
            light = palette(False)
            assert light.mention_word.color == Color.parse("#ff0000")  # both themes
            assert light.selected.bgcolor != Color.parse("#123456")  # dark only
    finally:
        from app.tui.render import set_colours

        set_colours(None)
    assert palette(True).mention_word.color != Color.parse("#ff0000")  # reset


@pytest.mark.parametrize(
    ("toml", "says"),
    [
        ('[keys]\nserch = "ctrl+f"\n',
         "[keys] serch: unknown action; the actions are next_channel"),
        ('[keys]\nsearch = "x"\n', "[keys] search = 'x' would be typed into the input line"),
        ('[keys]\nsearch = "ctrl+n"\n',
         "[keys] next_channel and search both use 'ctrl+n' (next_channel has it by default"),
        ('[keys]\nsearch = "enter"\n', "[keys] search = 'enter' sends the line"),
        ('[keys]\nsearch = "hyper+f"\n', "unknown modifier 'hyper' (ctrl, alt, shift)"),
        ('[keys]\nsearch = 5\n', "[keys] search must be a key (\"ctrl+f\") or a list of keys"),
        ('[colours]\nmention = "blurple"\n',
         "[colours] mention = 'blurple' is not a colour (use #rrggbb"),
        ('[colours.light]\nmentoin = "red"\n',
         "[colours.light] mentoin: unknown colour name; the names are time"),
        ('keys = "ctrl+f"\n', "keys must be a table"),
    ],
)
def test_a_bad_entry_is_a_clear_error_at_start_and_nothing_is_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], toml: str, says: str
) -> None:
    config = tmp_path / "sdschat.toml"
    config.write_text(toml, "utf-8")
    data_dir = tmp_path / "data"
    code = main(["join", "general", "--config", str(config), "--data-dir", str(data_dir),
                 "--relay", "ws://127.0.0.1:9"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == EXIT_USAGE
    assert says in err and str(config) in err
    assert err.count("\n") == 1  # one line, no traceback
    assert not data_dir.exists()  # nothing opened, nothing created


def test_every_default_key_is_documented() -> None:
    """docs/chat.md lists every action of [keys] with its default key."""
    doc = (Path(__file__).parents[2] / "docs" / "chat.md").read_text("utf-8")
    for name, (key, _action, _what) in ACTIONS.items():
        assert f"| `{name}` | `{key}` |" in doc, name
