"""The chat pages: a new chat, the chat of a session, and a what-if replay."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from memory import CompactionMemoryConfig, ConfigurationError
from motus_web.sessions.access import session_for_user, visible_session
from motus_web.sessions.long_term_store import owner_scope
from motus_web.sessions.memories import restore_view, threshold_of
from motus_web.sessions.models import Session
from motus_web.sessions.operations import create_session
from motus_web.ui.rendering import render

from .curve import token_curves
from .forms import NewChatForm, ReplayForm, chat_model, memory_config
from .frames import MAX_FRAME_BYTES
from .render import record_frames
from .replay import ReplaySettings, create_replay, replay_of
from .tools import new_chat_tool_schemas, session_overhead

SHOWN_RECORDS = 100  # the latest records the page renders; the socket sends the rest


@require_http_methods(["GET", "HEAD", "POST"])
@login_required
def chat_new(request: HttpRequest) -> HttpResponse:
    """A form for a new chat session; without configured models, how to configure one."""
    if not settings.MOTUS_CHAT_MODELS:
        return render(request, "chat/new.html", {"form": None})
    form = NewChatForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        model = chat_model(data["model"])
        config = memory_config(data["token_threshold"], model)
        long_term: dict[str, Any] = {}
        if data["remember"]:
            scope = owner_scope(int(request.user.pk or 0), data["memory_name"])
            long_term = {"long_term": {"scope": scope.to_dict()}}
        session = create_session(
            request.user,  # type: ignore[arg-type]
            config,
            title=data["title"] or "Chat",
            model_name=model.model,
            system_prompt=data["system_prompt"],
            tools=new_chat_tool_schemas(config, remember=bool(long_term)),
            memory_type="background" if long_term else "compact",
            extra=long_term,
        )
        return redirect("chat:chat", public_id=session.public_id)
    context = {"form": form, "advice": form.threshold_advice()}
    return render(request, "chat/new.html", context, status=400 if form.errors else 200)


@require_POST
@login_required
def chat_new_check(request: HttpRequest) -> HttpResponse:
    """What the new-chat form's fields leave for the conversation, before anything
    is created (the form asks for it as its fields change): a fragment."""
    if not settings.MOTUS_CHAT_MODELS:
        raise Http404("no chat model is configured")
    form = NewChatForm(request.POST)
    form.is_valid()  # the advice reads what is valid; errors are the submission's to show
    return render(request, "chat/new.html#threshold-advice", {"advice": form.threshold_advice()})


@require_safe
@login_required
def chat(request: HttpRequest, public_id: str) -> HttpResponse:
    """The live chat of a session: its latest records, then the socket's stream."""
    session, can_write = session_for_user(request, public_id)
    frames = record_frames(session, max(-1, session.record_count - 1 - SHOWN_RECORDS))
    original_id = replay_of(session)
    original = None
    if original_id is not None:
        original = Session.objects.visible_to(request.user).filter(public_id=original_id).first()
    context = {
        "session": session,
        "records": [mark_safe(frame["html"]) for frame in frames],  # rendered from our templates
        "last_pos": frames[-1]["pos"] if frames else -1,
        "earlier": frames[0]["pos"] > 1 if frames else False,
        "can_send": can_write,
        "models": settings.MOTUS_CHAT_MODELS,
        "threshold": threshold_of(session),
        # A replay sends the original's tools (the replay's log has them), a chat its own.
        "overhead": session_overhead(
            session.config,
            session.model_name,
            session.system_prompt,
            restore_view(session).tool_schemas if original_id is not None else None,
            remember=session.memory_type == "background",
        ),
        "original": original,
        "is_replay": original_id is not None,
        "curves": token_curves(original, session) if original is not None else None,
        "max_frame_bytes": MAX_FRAME_BYTES,
    }
    return render(request, "chat/chat.html", context)


@require_http_methods(["GET", "HEAD", "POST"])
@login_required
def replay_new(request: HttpRequest, public_id: str) -> HttpResponse:
    """Choose memory settings and replay the session into a new one."""
    original = visible_session(request, public_id)
    if not original.message_count:
        raise Http404("this session has no messages to replay")
    initial = {"model_name": original.model_name or settings.MOTUS_MODEL_NAME}
    form = ReplayForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        replay_settings = ReplaySettings(
            token_threshold=data["token_threshold"],
            safety_ratio=data["safety_ratio"],
            max_tool_result_tokens=data["max_tool_result_tokens"],
            model_name=data["model_name"],
            compactor=data["compactor"],
            clear_tool_results=data["clear_tool_results"],
            clear_keep_tool_results=_or_default(data["clear_keep_tool_results"]),
        )
        try:
            session = create_replay(original, replay_settings, request.user)  # type: ignore[arg-type]
        except ConfigurationError as error:
            form.add_error(None, str(error))
        else:
            return redirect("chat:chat", public_id=session.public_id)
    context = {"form": form, "session": original, "curves": token_curves(original, None)}
    return render(request, "chat/replay_new.html", context, status=400 if form.errors else 200)


def _or_default(keep: int | None) -> int:
    """The replay form's tool results kept whole; empty: the library's default."""
    return CompactionMemoryConfig().clear_keep_tool_results if keep is None else keep
