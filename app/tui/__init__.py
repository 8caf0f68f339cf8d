"""The Textual TUI of ``sdschat join`` (see :mod:`app.tui.app`)."""

from app.tui.app import SdsChatApp, TuiOptions, make_app

__all__ = ["SdsChatApp", "TuiOptions", "make_app"]
