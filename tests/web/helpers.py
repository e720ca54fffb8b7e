"""Plain helpers to make sessions the way the memory and the importer do."""

from __future__ import annotations

import uuid
from html.parser import HTMLParser
from typing import TYPE_CHECKING, Any

from django.contrib.auth.models import AbstractBaseUser, User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from django_tasks_db.management.commands.db_worker import Worker
from django_tasks_db.models import DBTaskResult
from django_tasks_db.utils import exclusive_transaction

from memory import ChatMessage
from motus_web.sessions.importers.runner import Replayer
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import Session

if TYPE_CHECKING:
    from django.test.client import _MonkeyPatchedWSGIResponse


def chat(turns: int, *, filler: int = 0) -> list[ChatMessage]:
    """``turns`` user turns, each with one tool call, its result and an answer.

    ``filler`` words pad every tool result, to push the context over a threshold.
    """
    messages: list[dict[str, Any]] = []
    for turn in range(turns):
        call_id = f"call_{turn}"
        messages += [
            {"role": "user", "content": f"Question {turn}: where is booking B{turn}?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "get_booking", "arguments": f'{{"id": "B{turn}"}}'},
                    }
                ],
            },
            {
                "role": "tool",
                "tool_call_id": call_id,
                "name": "get_booking",
                "content": f"Booking B{turn} flies to city {turn}. " + "details " * filler,
            },
            {"role": "assistant", "content": f"Booking B{turn} flies to city {turn}."},
        ]
    return [ChatMessage.from_dict(m) for m in messages]


def log_records(
    session_id: str,
    messages: list[ChatMessage],
    *,
    system_prompt: str,
    model_name: str | None,
    threshold: int | None,
) -> list[dict[str, Any]]:
    """Every record the importer's memory logs for ``messages``, as dicts."""
    replayer = Replayer(
        session_id, system_prompt=system_prompt, model_name=model_name, threshold=threshold
    )
    try:
        return [record.to_dict() for record in replayer.add(messages)]
    finally:
        replayer.close()


def make_session(
    owner: AbstractBaseUser | None = None,
    *,
    turns: int = 2,
    filler: int = 0,
    threshold: int | None = None,
    title: str = "",
    parent: Session | None = None,
) -> Session:
    """A session as the memory logs it; with ``parent``, a fork of it at its seq 3."""
    session_id = uuid.uuid4().hex
    records = log_records(
        session_id,
        chat(turns, filler=filler),
        system_prompt="You are a booking assistant.",
        model_name="gpt-4o",
        threshold=threshold,
    )
    records[0]["title"] = title
    if parent is not None:
        records[0].update(parent_session_id=parent.public_id, parent_seq=3)
    DatabaseLogStore().extend(session_id, records)
    Session.objects.filter(public_id=session_id).update(owner=owner)
    return Session.objects.get(public_id=session_id)


def logged_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def import_upload(
    client: Client, name: str, data: bytes, **fields: object
) -> _MonkeyPatchedWSGIResponse:
    """Upload a file on the Import page, run its job as the runner does, and GET its page.

    The token threshold is 3,000 unless ``fields`` says otherwise.
    """
    form = {"file": SimpleUploadedFile(name, data), "threshold": 3000, **fields}
    response = client.post(reverse("dashboard:import_upload"), {**upload_token(client), **form})
    assert response.status_code == 303, response.content.decode()
    assert run_tasks() == 1
    page = client.get(response["Location"])
    assert page.status_code == 200
    return page


def upload_token(client: Client) -> dict[str, str]:
    """The hidden fields (the one-time token) of the Import page's upload form."""
    page = client.get(reverse("dashboard:import_form")).content.decode()
    return confirmation_form(page, reverse("dashboard:import_upload"))[1]


def run_tasks() -> int:
    """Run the ready tasks as ``manage.py db_worker --batch`` does (its claim and
    its ``run_task``), in this process and the test's transaction (the worker's
    own loop closes a connection that is inside one); how many ran an import job."""
    worker = Worker(
        queue_names=["default"],
        interval=0,
        batch=True,
        backend_name="default",
        startup_delay=False,
        max_tasks=None,
        worker_id="test",
        excluded_queue_names=[],
    )
    ran = 0
    while True:
        with exclusive_transaction():
            task = DBTaskResult.objects.ready().get_locked()
            if task is None:
                return ran
            task.claim(worker.worker_id)
        worker.run_task(task)
        task.refresh_from_db()
        ran += task.return_value is not None


class _Forms(HTMLParser):
    """The POST forms of a page: their action and hidden fields."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        if tag == "form" and found.get("method") == "post":
            self.forms.append((found.get("action", ""), {}))
        elif tag == "input" and found.get("type") == "hidden" and self.forms:
            self.forms[-1][1][found["name"]] = found.get("value", "")


def confirmation_form(page: str, action: str | None = None) -> tuple[str, dict[str, str]]:
    """The action and hidden fields of the page's POST form (the one posting to
    ``action``, or the only one besides log out)."""
    parser = _Forms()
    parser.feed(page)
    forms = [f for f in parser.forms if f[0] != reverse("logout")]
    if action is not None:
        forms = [f for f in forms if f[0] == action]
    assert len(forms) == 1, forms
    url, hidden = forms[0]
    hidden.pop("csrfmiddlewaretoken", None)
    return url, hidden


def confirm(client: Client, confirm_url: str, **fields: object) -> _MonkeyPatchedWSGIResponse:
    """Open a confirmation page and send its form as a person would, with ``fields``."""
    page = client.get(confirm_url)
    assert page.status_code == 200, page.content.decode()
    url, hidden = confirmation_form(page.content.decode())
    return client.post(url, {**hidden, **fields})
