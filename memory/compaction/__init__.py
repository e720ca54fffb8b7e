"""Compaction: folding older turns into a summary at clean turn boundaries.

- ``policy``: where to cut, the summary's budget, when to fall back (pure functions);
- ``base``: ``CompactionBase``, compaction as state changes of a memory;
- ``memory``: ``CompactionMemory``, plus its conversation log;
- ``replay``: restore from a log or a state, fork, upgrade old logs;
- ``reference``: logs of the reference implementation, restored to what it held;
- ``summarize``: the model summariser, its prompts and the continuation message;
- ``offline``: the summariser that needs no model (scan, digest, layout).
"""
