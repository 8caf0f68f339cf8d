"""sdschat application room: the node runtime, the command line, the TUI and headless mode."""
