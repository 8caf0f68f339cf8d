"""What a person types, for both front ends: the one command table with its parser,
completion and help texts (:mod:`app.commands.table`), a handler per command
(:mod:`app.commands.handlers`) written against the front-end protocol
(:mod:`app.commands.front`), headless mode's names for the parser
(:mod:`app.commands.line`), emoji shortcodes (:mod:`app.commands.emoji`), and the
commands run on a node: typed content (:mod:`app.commands.content`) and members
channels (:mod:`app.commands.members`).
"""
