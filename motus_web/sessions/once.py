"""Exactly once: the one-time token every operator action's form carries.

A confirmation page puts ``token_for(user, page, target, state)`` in its form
(field ``TOKEN_FIELD``): every rendering of one confirmation in one state
carries the same token (an upload's form, whose target is unknown until it
is sent, and the chat's "Compact now", a random ``new_token(user)``).

Every token is issued by the server to one user: its body (the confirmation's
HMAC, or random) is followed by an HMAC of the user and the body, keyed with
``SECRET_KEY`` (``issued``). ``spend`` refuses a token this server did not
issue to the user who sends it (made up in the right shape, or another
user's) with ``TokenError``, as a form without one: nothing is done, and no
row records it.
The POST that acts calls ``spend`` first, inside the transaction that does
the action: it inserts an ``ActionToken`` row, whose unique ``token`` is the
atomic step. A second submission of the same form (a double click, the back
button and resubmit, another tab, two workers at the same instant) fails that
insert (on PostgreSQL it waits for the first transaction, then fails) and gets
``AlreadyDoneError`` with the first one's result. The first one's action and
its row commit together or not at all, so a crash or a refused action
(``StaleTargetError``, a busy session) spends nothing: the form may be sent
again and is judged again. An action that ran and failed gives its token
back (``give_back``) in the same transaction.

The row is keyed by the token, the action and the content sent
(``spent_key``), not by the token alone: one page's forms (edit and forget
of a memory) share a token, and a form sent again with other content (another
correction of one summary, from a second tab) is another request. Each is
judged on its own (usually "it changed"), never answered with another
request's "already done".
"""

from __future__ import annotations

import re
import secrets
from typing import TYPE_CHECKING, TypeGuard

from django.db import IntegrityError, transaction
from django.utils.crypto import constant_time_compare, salted_hmac

from .models import ActionToken

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

TOKEN_FIELD = "once"
TOKEN_RULE = "20 to 64 letters, digits, '-' or '_'"
_TOKEN = re.compile(r"[A-Za-z0-9_-]{20,64}")
_BODY_CHARS = 32  # hexadecimal: the confirmation's HMAC, or 16 random bytes
_SIGNATURE_CHARS = 24  # hexadecimal: 96 bits of the HMAC over the user and the body


class TokenError(ValueError):
    """The form carries no one-time token, or not one this server makes."""


class AlreadyDoneError(Exception):
    """The form's token was spent: its action was done before (``spent``)."""

    def __init__(self, spent: ActionToken) -> None:
        self.spent = spent
        super().__init__(f"{spent.action} was already done at {spent.spent_at:%Y-%m-%d %H:%M:%S}")


class StaleTargetError(Exception):
    """What the form named is no longer what it would act on; the message
    names what changed. Nothing was done."""


def is_token(value: object) -> TypeGuard[str]:
    """Whether ``value`` is a one-time token as ``spend`` takes them (``TOKEN_RULE``)."""
    return isinstance(value, str) and _TOKEN.fullmatch(value) is not None


def new_token(user: AbstractBaseUser | AnonymousUser | None) -> str:
    """A random token issued to ``user``: for a form whose target is known only
    when it is sent (an upload, the chat's "Compact now")."""
    return _issued_to(user, secrets.token_hex(_BODY_CHARS // 2))


def token_for(user: AbstractBaseUser | AnonymousUser | None, *names: object) -> str:
    """The token of one confirmation for one user: the same for every
    rendering of it while ``names`` (the page, its target, the state it was
    made in) are the same, so that Back and resubmit, a second tab and a
    double click all carry one token and only the first submission acts.
    Keyed with ``SECRET_KEY`` (``salted_hmac``): nobody can make another
    user's token, nor one of their own that the server did not issue."""
    value = "\x1f".join(str(name) for name in (_who(user), *names))
    return _issued_to(user, salted_hmac("motus.once", value).hexdigest()[:_BODY_CHARS])


def issued(token: object, user: AbstractBaseUser | AnonymousUser | None) -> TypeGuard[str]:
    """Whether ``token`` is one this server issued to ``user`` (``new_token``,
    ``token_for``): its signature is the HMAC of the user and its body,
    compared in constant time."""
    if not is_token(token) or len(token) != _BODY_CHARS + _SIGNATURE_CHARS:
        return False
    return constant_time_compare(token, _issued_to(user, token[:_BODY_CHARS]))


def _issued_to(user: AbstractBaseUser | AnonymousUser | None, body: str) -> str:
    value = f"{_who(user)}\x1f{body}"
    return body + salted_hmac("motus.once.issued", value).hexdigest()[:_SIGNATURE_CHARS]


def _who(user: AbstractBaseUser | AnonymousUser | None) -> object:
    return user.pk if user is not None and user.is_authenticated else ""


def spent_key(token: str, action: str, content: str = "") -> str:
    """The key of the ``ActionToken`` row that spending ``token`` for ``action``
    with ``content`` (what the form sent that makes it a request of its own:
    an edit's text) inserts."""
    value = "\x1f".join((token, action, content))
    return salted_hmac("motus.once.spent", value).hexdigest()[:40]


def spend(
    token: object,
    *,
    action: str,
    target: str,
    user: AbstractBaseUser | AnonymousUser | None,
    content: str = "",
) -> ActionToken:
    """Spend ``token`` for ``action`` on ``target`` with ``content``, inside
    the caller's transaction. Raises ``TokenError`` for a missing token or
    one the server did not issue to ``user`` (``issued``), and
    ``AlreadyDoneError`` when this action with this content was done with it
    before."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("once.spend() belongs inside the action's transaction")
    if not issued(token, user):
        raise TokenError("the form has no one-time token this server issued to you")
    key = spent_key(token, action, content)
    who = user.pk if user is not None and user.is_authenticated else None
    try:
        with transaction.atomic():
            return ActionToken.objects.create(
                token=key, action=action, target=target[:255], user_id=who
            )
    except IntegrityError:
        raise AlreadyDoneError(ActionToken.objects.get(token=key)) from None


def spent(token: object, action: str, content: str = "") -> ActionToken | None:
    """The row of ``token`` spent for ``action`` with ``content``, if it was."""
    if not is_token(token):
        return None
    return ActionToken.objects.filter(token=spent_key(token, action, content)).first()


def give_back(token: object, action: str, content: str = "") -> None:
    """Unspend ``token`` for ``action`` with ``content``: the action failed, and
    the same form may be sent again."""
    if isinstance(token, str):
        ActionToken.objects.filter(token=spent_key(token, action, content)).delete()


def done(spent: ActionToken, url: str, label: str) -> None:
    """Note where the action's result is, for a second submission to link to."""
    spent.result_url, spent.result_label = url[:500], label[:300]
    spent.save(update_fields=["result_url", "result_label"])
