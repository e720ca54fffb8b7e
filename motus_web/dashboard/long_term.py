"""The Memories pages: what a background memory remembers, per scope, and corrections.

A scope's page lists its memories (search, and filters by kind, status,
source session and date), each with its provenance (links to the messages it
came from) and its history, and lets the owner or staff edit, forget or
restore one. Those three are operator actions with the same exactly-once
rules as the others (``exactly_once``): each form carries a one-time token
and the memory's version as the page showed it, so a second submission does
nothing (409, linking to the result) and a memory changed since (by the agent,
the extractor or another tab) is not changed blindly (409, naming what
changed). Each action and its token are one transaction: a crash mid-way
leaves neither, and the form may be sent again. Only the scope's owner and
staff see it; anyone else gets 404, as for a session.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from memory import ConfigurationError, LongTermMemoryError, Scope
from memory.background import KINDS, STATUSES, Filters, Memory
from motus_web.sessions import once
from motus_web.sessions.access import may_write
from motus_web.sessions.long_term_store import DjangoLongTermStore, owner_of
from motus_web.sessions.models import LongTermMemory, Session
from motus_web.ui.rendering import render

from .exactly_once import Refused, acting, fields

PAGE = 100
ACTIONS = ("edit", "forget", "restore")
EDIT_MAX_CHARS = 2_000
CHAIN_SCAN = 1_000  # superseded memories read to draw the chains of one page


def _scope(request: HttpRequest, user_id: str, agent_id: str = "") -> Scope:
    """The scope named by the URL, when the user may see it (its owner, or
    staff when it holds memories); 404 otherwise, whether it exists or not."""
    try:
        scope = Scope(user_id=user_id, agent_id=agent_id or None)
    except ConfigurationError:
        raise Http404("No such memory scope.") from None
    user = request.user
    owner = owner_of(scope)
    own = user.is_authenticated and owner == user.pk
    if not may_write(user, owner):
        raise Http404("No such memory scope.")
    # One's own scope may be empty yet; another's is there only when it holds memories.
    if not own and not LongTermMemory.objects.filter(scope_key=scope.key).exists():
        raise Http404("No such memory scope.")
    return scope


def action_url(scope: Scope, memory_id: str, action: str) -> str:
    if scope.agent_id:
        args = [scope.user_id, scope.agent_id, memory_id, action]
        return reverse("dashboard:memory_action_named", args=args)
    return reverse("dashboard:memory_action", args=[scope.user_id, memory_id, action])


def scope_url(scope: Scope) -> str:
    if scope.agent_id:
        return reverse("dashboard:memory_scope_named", args=[scope.user_id, scope.agent_id])
    return reverse("dashboard:memory_scope", args=[scope.user_id])


@require_safe
@login_required
def memory_scopes(request: HttpRequest) -> HttpResponse:
    """The scopes the user may see, with how many memories each holds."""
    rows = LongTermMemory.objects.all()
    if not request.user.is_staff:
        rows = rows.filter(scope_key__startswith=f"user=user-{request.user.pk};")
    counts: dict[str, int] = {}
    for key in rows.filter(status="active").values_list("scope_key", flat=True):
        counts[key] = counts.get(key, 0) + 1
    for key in rows.values_list("scope_key", flat=True).distinct():
        counts.setdefault(key, 0)
    owners = {u.pk: u for u in get_user_model().objects.filter(pk__in=_owner_pks(counts))}
    scopes = []
    for key, active in sorted(counts.items()):
        scope = Scope.from_key(key)
        pk = owner_of(scope)
        scopes.append(
            {
                "scope": scope,
                "url": scope_url(scope),
                "active": active,
                "owner": owners.get(pk) if pk is not None else None,
            }
        )
    return render(request, "dashboard/memory_scopes.html", {"scopes": scopes})


def _owner_pks(keys: dict[str, int]) -> set[int]:
    return {pk for key in keys if (pk := owner_of(Scope.from_key(key))) is not None}


def _filters(request: HttpRequest) -> Filters:
    get = request.GET
    kind, status = get.get("kind") or None, get.get("status", "active") or None
    if kind not in (None, *KINDS):
        raise BadRequest(f"No memory is of the kind {kind!r}: the kinds are {', '.join(KINDS)}.")
    if status not in (None, *STATUSES):
        raise BadRequest(
            f"No memory has the status {status!r}: the statuses are {', '.join(STATUSES)}."
        )
    return Filters(
        status=status,
        kind=kind,
        session_id=get.get("session") or None,
        since=get.get("since") or None,
        until=get.get("until") or None,
        query=get.get("q") or None,
    )


@require_safe
@login_required
def memory_scope(request: HttpRequest, user_id: str, agent_id: str = "") -> HttpResponse:
    """One scope's memories, filtered, each with its provenance and history."""
    from .memory_workbench import split_url, workbench  # it builds on this module's rules

    scope = _scope(request, user_id, agent_id)
    store = DjangoLongTermStore()
    try:
        filters = _filters(request)
    except BadRequest as error:  # answered here: a typo in an address is not a server error
        return render(request, "errors/400.html", {"reason": str(error)}, status=400)
    found = store.memories(scope, filters, limit=PAGE)
    # Provenance names only the sessions the viewer may see: a memory of this
    # scope may come from a session they may not (staff's fork of the owner's
    # chat, a session deleted since), shown as "another session".
    sessions = {
        s.public_id: s
        for s in Session.objects.visible_to(request.user).filter(
            public_id__in={p.session_id for m in found for p in m.provenance if p.session_id}
        )
    }
    earlier = _supersession_chains(store, scope, found)
    rows = [
        {
            "memory": memory,
            "earlier": earlier.get(memory.id, []),
            "history": store.history(scope, memory.id),
            "links": [
                {"link": p, "session": sessions.get(p.session_id or "")} for p in memory.provenance
            ],
            "hidden": fields(request, state=memory.id, version=memory.version),
            "urls": {action: action_url(scope, memory.id, action) for action in ACTIONS},
            "split_url": split_url(scope, memory.id),
        }
        for memory in found
    ]
    context: dict[str, Any] = {
        "scope": scope,
        "scope_url": scope_url(scope),
        "rows": rows,
        "filters": filters,
        "kinds": KINDS,
        "statuses": STATUSES,
        "counts": {s: store.count(scope, status=s) for s in STATUSES},
        "page": PAGE,
        "workbench": workbench(request, scope, store.count(scope, status=None)),
    }
    return render(request, "dashboard/memory_scope.html", context)


def _supersession_chains(
    store: DjangoLongTermStore, scope: Scope, shown: list[Memory]
) -> dict[str, list[Memory]]:
    """For each memory shown, the memories it replaced, newest first (the chain
    of supersessions back to the first statement), from the scope's newest
    ``CHAIN_SCAN`` superseded memories."""
    superseded = store.memories(scope, Filters(status="superseded"), limit=CHAIN_SCAN)
    replaced = {m.superseded_by: m for m in superseded if m.superseded_by}
    chains: dict[str, list[Memory]] = {}
    for memory in shown:
        chain, current, seen = [], memory.id, {memory.id}
        while (older := replaced.get(current)) is not None and older.id not in seen:
            chain.append(older)
            seen.add(older.id)
            current = older.id
        if chain:
            chains[memory.id] = chain
    return chains


@require_POST
@login_required
def memory_action(
    request: HttpRequest, user_id: str, memory_id: str, action: str, agent_id: str = ""
) -> HttpResponse:
    """Edit, forget or restore one memory, once (see the module docstring)."""
    scope = _scope(request, user_id, agent_id)
    if action not in ACTIONS:
        raise Http404("No such action.")
    back = scope_url(scope)
    store = DjangoLongTermStore()
    actor = f"operator:{request.user.get_username()}"
    reason = request.POST.get("reason", "").strip()[:500] or f"{action} from the dashboard"
    text = request.POST.get("text", "").strip() if action == "edit" else ""
    try:
        version = _version(request)
        target = f"{scope.key} {memory_id}"
        with acting(request, f"memory_{action}", target, back, text) as spent:
            current = _current(store, scope, memory_id, version)
            if action == "edit":
                if not text or len(text) > EDIT_MAX_CHARS:
                    raise Refused(
                        400,
                        "Not saved",
                        f"A memory is 1 to {EDIT_MAX_CHARS:,} characters. Nothing was changed.",
                        back,
                    )
                store.update(scope, current.id, text=text, actor=actor, reason=reason)
                done = f"Memory {current.id} edited (version {current.version + 1})."
            elif action == "forget":
                store.forget(scope, current.id, actor=actor, reason=reason)
                done = f"Memory {current.id} forgotten; its history keeps it."
            else:
                store.restore(scope, current.id, actor=actor, reason=reason)
                done = f"Memory {current.id} restored."
            once.done(spent, back, done)
    except Refused as refused:
        return refused.response(request)
    except LongTermMemoryError as error:
        return Refused(409, "Not done", f"{error}. Nothing was changed.", back).response(request)
    messages.success(request, done)
    return HttpResponseRedirect(back, status=303)


def _version(request: HttpRequest) -> int:
    try:
        return int(request.POST.get("version", ""))
    except ValueError:
        raise Refused(
            400, "This form cannot be sent", "It does not say which version it is for.", ""
        ) from None


def _current(store: DjangoLongTermStore, scope: Scope, memory_id: str, version: int) -> Any:
    """The memory, when it is still the version the form showed."""
    try:
        current = store.get(scope, memory_id)
    except LongTermMemoryError:
        raise Http404("No such memory.") from None
    if current.version != version:
        last = store.history(scope, memory_id)[-1]
        raise once.StaleTargetError(
            f"Memory {memory_id} changed since this page was opened: it is at version "
            f"{current.version} ({last.action} by {last.actor}), not {version}. Nothing was done."
        )
    return current
