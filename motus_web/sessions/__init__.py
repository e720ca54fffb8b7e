"""Storage of conversation sessions: models, the database log store, importers and commands.

The one writer of session rows is ``log_store.DatabaseLogStore``: live memories,
imports, replays and operator actions all append records through it, and it
announces each committed record (``signals.records_committed`` and, with a
channel layer, the session's group). The UI lives in ``motus_web.dashboard``,
the websocket in ``motus_web.chat``.
"""
