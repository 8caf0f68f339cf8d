"""What a person types: the parser of a typed line and its help text
(:mod:`app.commands.line`, headless mode), the TUI's command table
(:mod:`app.commands.table`), emoji shortcodes (:mod:`app.commands.emoji`), and the
commands run on a node: typed content (:mod:`app.commands.content`) and members
channels (:mod:`app.commands.members`).
"""
