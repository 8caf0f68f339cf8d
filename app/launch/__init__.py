"""What both front ends (the TUI and headless mode) share to start: exit codes, the
passphrase file, the data directory, the node's settings from flags and the config file
(:mod:`app.launch.settings`), the channels remembered between runs
(:mod:`app.launch.joined`); and the sub-commands that start no chat: ``sdschat demo``
(:mod:`app.launch.demo`, :mod:`app.launch.core_demo`), ``sdschat store``
(:mod:`app.launch.store_cmd`) and ``sdschat invite`` (:mod:`app.launch.invite_cmd`).
"""
