"""The Memories page's workbench: add a memory by hand, split one into several.

Both are the scope owner's (staff may look, not write: what a person is
reminded of is theirs to shape), with the exactly-once rules of the page's
other actions (``exactly_once``): the form carries a one-time token, a second
submission does nothing (409), and a memory changed since the page showed it
is not split blindly (409). Each action and its token are one transaction
(the Django store writes in the request's database), so a crash mid-way
leaves neither: no half-split memory, and the form may be sent again.

- **Add**: one new active memory, its provenance the operator
  (``operator:<username>``, no session).
- **Split**: one statement a line, 2 to ``SPLIT_MAX`` of them; the first
  supersedes the memory (its history names the split) and the others are new
  memories; every one keeps all of the original's provenance links, so "where
  was this said" still answers for each part.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from memory import ConfigurationError, LongTermMemoryError, Scope
from memory.background import KINDS, Provenance
from motus_web.sessions import once
from motus_web.sessions.long_term_store import DjangoLongTermStore, owner_of

from .exactly_once import Refused, acting, fields
from .long_term import EDIT_MAX_CHARS, _current, _scope, _version, scope_url

SPLIT_MAX = 10  # parts one split may make: a memory is one statement, not a list


def _now() -> str:
    """ISO-8601 UTC, as a provenance link's ``ts``."""
    return datetime.now(UTC).isoformat()


def owns(request: HttpRequest, scope: Scope) -> bool:
    """Whether the user is the scope's owner (the one who may add and split)."""
    user = request.user
    return bool(user.is_authenticated and owner_of(scope) == user.pk)


def workbench(request: HttpRequest, scope: Scope, total: int) -> dict[str, object]:
    """What the scope's page needs for the workbench: whether the viewer may
    write, the add form's hidden fields and address, and each memory's split
    address by id (``split_urls``: a function of the id)."""
    if not owns(request, scope):
        return {"own": False}
    if scope.agent_id:
        add = reverse("dashboard:memory_add_named", args=[scope.user_id, scope.agent_id])
    else:
        add = reverse("dashboard:memory_add", args=[scope.user_id])
    # One token per page state: sent twice from the same page, an add is done once.
    return {"own": True, "add_url": add, "add_hidden": fields(request, state=f"add {total}")}


def split_url(scope: Scope, memory_id: str) -> str:
    if scope.agent_id:
        args = [scope.user_id, scope.agent_id, memory_id]
        return reverse("dashboard:memory_split_named", args=args)
    return reverse("dashboard:memory_split", args=[scope.user_id, memory_id])


def _owner_scope(request: HttpRequest, user_id: str, agent_id: str) -> Scope:
    """The scope, when the user owns it; staff and others get 404 (``_scope``) or 403."""
    scope = _scope(request, user_id, agent_id)
    if not owns(request, scope):
        raise Refused(
            403,
            "Not yours to change",
            "Only the owner of these memories may add to them or split them. Nothing was done.",
            scope_url(scope),
        )
    return scope


def _text(value: str, back: str) -> str:
    text = " ".join(value.split())
    if not text or len(text) > EDIT_MAX_CHARS:
        raise Refused(
            400,
            "Not saved",
            f"A memory is 1 to {EDIT_MAX_CHARS:,} characters. Nothing was changed.",
            back,
        )
    return text


@require_POST
@login_required
def memory_add(request: HttpRequest, user_id: str, agent_id: str = "") -> HttpResponse:
    """Add one memory by hand (``text``, ``kind``; see the module docstring)."""
    try:
        scope = _owner_scope(request, user_id, agent_id)
        back = scope_url(scope)
        kind = request.POST.get("kind", "fact")
        if kind not in KINDS:
            raise Refused(400, "Not saved", f"The kinds are {', '.join(KINDS)}.", back)
        text = _text(request.POST.get("text", ""), back)
        actor = f"operator:{request.user.get_username()}"
        store = DjangoLongTermStore()
        with acting(request, "memory_add", scope.key, back, f"{kind} {text}") as spent:
            link = Provenance(None, None, None, actor, _now())
            memory, new = store.add(scope, text=text, kind=kind, provenance=link)
            done = (
                f"Memory {memory.id} added."
                if new
                else f"Memory {memory.id} already said this; it got a link instead."
            )
            once.done(spent, back, done)
    except Refused as refused:
        return refused.response(request)
    except (LongTermMemoryError, ConfigurationError) as error:
        return Refused(409, "Not done", f"{error}. Nothing was changed.", back).response(request)
    messages.success(request, done)
    return HttpResponseRedirect(back, status=303)


def split_parts(value: str, back: str) -> list[str]:
    """The statements of a split form: one a line, blank lines left out;
    ``Refused`` (400) unless there are 2 to ``SPLIT_MAX``, each 1 to
    ``EDIT_MAX_CHARS`` characters."""
    parts = [" ".join(line.split()) for line in value.splitlines()]
    parts = [part for part in parts if part]
    if not 2 <= len(parts) <= SPLIT_MAX:
        raise Refused(
            400,
            "Not split",
            f"Write 2 to {SPLIT_MAX} statements, one a line; the form had {len(parts)}. "
            "Nothing was changed.",
            back,
        )
    return [_text(part, back) for part in parts]


@require_POST
@login_required
def memory_split(
    request: HttpRequest, user_id: str, memory_id: str, agent_id: str = ""
) -> HttpResponse:
    """Split one active memory into several (see the module docstring)."""
    try:
        scope = _owner_scope(request, user_id, agent_id)
        back = scope_url(scope)
        parts = split_parts(request.POST.get("parts", ""), back)
        version = _version(request)
        actor = f"operator:{request.user.get_username()}"
        store = DjangoLongTermStore()
        content = "\n".join(parts)
        with acting(request, "memory_split", f"{scope.key} {memory_id}", back, content) as spent:
            current = _current(store, scope, memory_id, version)
            if current.status != "active":
                raise Refused(409, "Not split", f"Memory {memory_id} is not active.", back)
            links = current.provenance or (Provenance(None, None, None, actor, _now()),)
            made = [
                store.supersede(
                    scope,
                    current.id,
                    text=parts[0],
                    kind=current.kind,
                    provenance=links[0],
                    importance=current.importance,
                    when=current.when,
                    reason=f"split by {actor} into {len(parts)}",
                )
            ]
            for text in parts[1:]:
                memory, _ = store.add(
                    scope,
                    text=text,
                    kind=current.kind,
                    provenance=links[0],
                    importance=current.importance,
                    when=current.when,
                )
                made.append(memory)
            for memory in made:
                for link in links[1:]:
                    store.link(scope, memory.id, link)
            done = f"Memory {current.id} split into {', '.join(m.id for m in made)}."
            once.done(spent, back, done)
    except Refused as refused:
        return refused.response(request)
    except LongTermMemoryError as error:
        return Refused(409, "Not done", f"{error}. Nothing was changed.", back).response(request)
    messages.success(request, done)
    return HttpResponseRedirect(back, status=303)
