"""SQLite persistence (aiosqlite): channel logs, protocol state, identity, event log."""
