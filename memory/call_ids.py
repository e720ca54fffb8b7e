"""Ids for tool calls that came without one, or with one another call of the message has.

Some servers (Gemini's OpenAI-compatible layer, LM Studio, some gateways) send
``"id": ""`` on every tool call, and the legacy function-calling API has no
ids at all; a buggy gateway may give two calls of one message the same id.
Providers pair a result with its call by id, and so does a memory, so a batch
of two such calls and their two results would collapse into one, leaving a
call without a result, which a provider refuses.

A memory could refuse such messages; it gives them ids instead, because the
reply is what the provider sent and an agent cannot make it otherwise: refusing
would stop the conversation, while distinct ids keep the batch whole and are
what any provider accepts back. The rule, deterministic so that a restore
derives what the live memory did:

- an assistant message's call with an empty id, or with the id of an earlier
  call of the same message, gets ``call_motus_{seq}_{i}`` (``seq`` of the
  message, ``i`` the call's place in it);
- a tool result with an empty or no ``tool_call_id`` (a legacy ``function``
  message), or with the id of a call of the open batch already answered (the
  repeated id), answers the oldest unanswered call of the open batch whose
  id was given this way: results come in call order, as the agent ran the calls.

The message is logged as it was added; the form that entered the context
(assigned ids, in the current shape for legacy messages) is logged beside it as
``context_message``, which is the mapping.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable

from .messages import LEGACY_MARKERS, ChatMessage

ASSIGNED_ID_PREFIX = "call_motus_"


def assigned_id(seq: int, index: int) -> str:
    """The id given to the ``index``-th call (0-based) of message ``seq`` when it had none."""
    return f"{ASSIGNED_ID_PREFIX}{seq}_{index}"


def with_call_ids(
    message: ChatMessage, seq: int, open_ids: Iterable[str], answered: Collection[str] = ()
) -> ChatMessage:
    """``message`` as it enters the context, given its ``seq``, the ids of the
    open batch's unanswered calls in call order and those it has answered;
    ``message`` itself when it needs no id."""
    if message.role == "assistant" and message.tool_calls:
        call_ids = [call.id for call in message.tool_calls]
        if all(call_ids) and len(set(call_ids)) == len(call_ids):
            return message  # the usual case: every call has its own id
        seen: set[str] = set()
        calls = []
        for i, call in enumerate(message.tool_calls):
            if not call.id or call.id in seen:
                call = dataclasses.replace(call, id=assigned_id(seq, i))
            seen.add(call.id)
            calls.append(call)
        return _current_form(dataclasses.replace(message, tool_calls=tuple(calls)))
    ids = message.tool_call_ids
    if message.role == "tool" and (
        ids in ((), ("",)) or (len(ids) == 1 and ids[0] in answered and ids[0] not in open_ids)
    ):
        target = next((i for i in open_ids if i.startswith(ASSIGNED_ID_PREFIX)), None)
        if target is not None:
            return _current_form(dataclasses.replace(message, tool_call_id=target))
    return message


def _current_form(message: ChatMessage) -> ChatMessage:
    """Drop the markers that make a legacy message write back in the legacy
    shape: the context form is the current one, ids included."""
    if not any(key in message.extra for key in LEGACY_MARKERS):
        return message
    extra = {k: v for k, v in message.extra.items() if k not in LEGACY_MARKERS}
    return dataclasses.replace(message, extra=extra)
