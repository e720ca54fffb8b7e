"""The dashboard's side of exactly once (``motus_web.sessions.once``).

A confirmation form carries ``fields(...)``: its token (one per user, page,
target and state: ``once.token_for``) and what it names (its target: a
compaction's position, the session's record count when the page was made).
The POST view acts inside ``acting(...)``, which spends the token in the
action's transaction and turns every way of not acting into ``Refused``,
whose ``response`` is the page a person sees: 400 for a form without its
token, 409 for a second submission (with a link to what the first one did),
a stale target (naming what changed) or a session that a chat turn is
writing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import transaction
from django.http import HttpRequest, HttpResponse

from motus_web.sessions import lease, once
from motus_web.sessions.access import may_write
from motus_web.sessions.models import ActionToken
from motus_web.ui.rendering import render


def fields(request: HttpRequest, *, state: object = None, **target: object) -> dict[str, object]:
    """The hidden fields of a confirmation form: its token and ``target``.

    The token is one per user, page (``request.path``), target and ``state``
    (what the page showed: a session's record count, a memory's version), so
    a page opened again in the same state, by Back or in another tab, sends
    the token the first submission spent and is refused as already done. A
    form with neither a target nor a state (an upload) gets a fresh token.
    """
    if not target and state is None:
        return {once.TOKEN_FIELD: once.new_token(request.user)}
    names = [request.path, state, *(f"{k}={v}" for k, v in sorted(target.items()))]
    return {once.TOKEN_FIELD: once.token_for(request.user, *names), **target}


class Refused(Exception):
    """Nothing was done; ``response`` says why to the person who asked."""

    def __init__(
        self, status: int, title: str, text: str, back: str = "", spent: ActionToken | None = None
    ) -> None:
        super().__init__(text)
        self.status, self.title, self.text, self.back, self.spent = status, title, text, back, spent

    def response(self, request: HttpRequest) -> HttpResponse:
        spent = self.spent
        # A token someone else spent (pasted into another form) does not show their result.
        shown = spent if spent is not None and _own(request, spent) else None
        context = {"title": self.title, "text": self.text, "back": self.back, "spent": shown}
        return render(request, "dashboard/refused.html", context, status=self.status)


def _own(request: HttpRequest, spent: ActionToken) -> bool:
    return may_write(request.user, spent.user_id)


def _already_done(spent: ActionToken) -> Refused:
    return Refused(
        409,
        "Already done",
        f"This form was sent before, at {spent.spent_at:%Y-%m-%d %H:%M:%S} UTC, and what it "
        "asked for was done then. Sending it again did nothing.",
        spent=spent,
    )


def stale(error: once.StaleTargetError, back: str) -> Refused:
    return Refused(409, "Not done: it changed", str(error), back)


def spent_before(request: HttpRequest, action: str) -> Refused | None:
    """The refusal of a form whose token its owner spent already for ``action``,
    if it was (for an action whose target is gone once done: a deleted session)."""
    spent = once.spent(request.POST.get(once.TOKEN_FIELD), action)
    return _already_done(spent) if spent is not None and _own(request, spent) else None


@contextmanager
def acting(
    request: HttpRequest, action: str, target: str, back: str, content: str = ""
) -> Iterator[ActionToken]:
    """Do the block once for the form's token, ``action`` and ``content`` (what
    the form sent that makes it a request of its own: ``once.spent_key``), in
    one transaction; ``back`` is the confirmation page, linked from the
    refusals that may be retried.

    Raises ``Refused`` for a form without a token, a token spent before, a
    ``StaleTargetError`` or a ``SessionBusyError`` from the block; any other
    exception leaves the block, its transaction and its token rolled back.
    """
    try:
        with transaction.atomic():
            yield once.spend(
                request.POST.get(once.TOKEN_FIELD),
                action=action,
                target=target,
                user=request.user,
                content=content,
            )
    except once.TokenError:
        # A token the server did not issue to this user is refused as a missing one.
        raise Refused(
            400,
            "This form cannot be sent",
            "It carries no one-time token issued to you (it may come from an older page). "
            "Nothing was done; open the page again to see what the action would do now.",
            back,
        ) from None
    except once.AlreadyDoneError as error:
        raise _already_done(error.spent) from None
    except once.StaleTargetError as error:
        raise stale(error, back) from None
    except lease.SessionBusyError as error:
        raise Refused(
            409,
            "Not done: the session is busy",
            f"Nothing was done: {error.doing}. An action never lands in the middle of a "
            "turn; send this form again when the turn has finished.",
            back,
        ) from None
