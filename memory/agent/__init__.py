"""The agent: a ReAct loop over a model client and a memory.

- ``react``: ``ReActAgent`` (``run``, ``stream``), tool schemas from signatures;
- ``events``: the typed events ``ReActAgent.stream()`` yields;
- ``tools``: tools that need no network (a calculator, the current time).
"""

from .react import AgentBusyError, MaxStepsExceeded, ReActAgent, UserInput, tool_schema

__all__ = ["AgentBusyError", "MaxStepsExceeded", "ReActAgent", "UserInput", "tool_schema"]
