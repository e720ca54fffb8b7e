"""Compaction: folding older turns into a summary at clean turn boundaries.

- ``policy``: where to cut, the summary's budget, when to fall back (pure functions);
- ``state``: ``CompactionState``, the state and the only code that changes it;
- ``base``: ``CompactionBase``, when to compact, undo and correct, and what is recorded;
- ``memory``: ``CompactionMemory``, plus its conversation log, rewind, restore and fork;
- ``restore``: a state from a log (``checkpoint``: where a restore starts), upgrading old logs;
- ``meta``: the ``session_meta`` a compacting memory writes;
- ``summariser``: the summariser interface (offline, model, a user's ``compact_fn``);
- ``reference``: logs of the reference implementation, restored to what it held;
- ``summarize``: the model summary's prompts, the model call and the continuation message;
- ``offline``: the summariser that needs no model (scan, digest, layout).
"""
