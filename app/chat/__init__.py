"""Chat content without a node: the line format (:mod:`app.chat.lines`), typed content and
the conversation view (:mod:`app.chat.content`), a channel's history as people read it
(:mod:`app.chat.history`, :mod:`app.chat.history_fold`), files (:mod:`app.chat.files`,
:mod:`app.chat.file_quota`) and deleted text leaving the disk (:mod:`app.chat.redaction`).
"""
