"""New sessions made from the chat pages: an empty log with its ``session_meta``."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from memory import CompactionMemory, CompactionMemoryConfig
from memory.log import records
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import Session


def create_session(
    owner: AbstractBaseUser,
    config: CompactionMemoryConfig,
    *,
    title: str,
    model_name: str,
    system_prompt: str = "",
    parent_session_id: str | None = None,
    extra: dict[str, Any] | None = None,
    tools: list[dict[str, Any]] | None = None,
) -> Session:
    """Store a new session owned by ``owner`` whose log holds only its meta;
    its memory is ``CompactionMemory.restore_from_log`` of it, with ``config``.
    ``tools``: the schemas every turn will send (a chat's), so that its first
    turn logs no change of them."""
    public_id = uuid.uuid4().hex
    stored = config.to_dict()
    for key in ("session_id", "log_base_path"):
        stored.pop(key)
    meta = records.SessionMeta(
        ts=records.now_iso(),
        session_id=public_id,
        system_prompt=system_prompt,
        config=stored,
        parent_session_id=parent_session_id,
        format_version=records.FORMAT_VERSION,
        memory_type=CompactionMemory.memory_type,
        model_name=model_name,
        tools=tools or None,
        title=title[:200],
        extra=extra or {},
    )
    with transaction.atomic():
        DatabaseLogStore().append(public_id, meta)
        Session.objects.filter(public_id=public_id).update(owner=owner)
    return Session.objects.get(public_id=public_id)
