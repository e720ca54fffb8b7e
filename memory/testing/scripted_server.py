"""A model server that answers from a script: for tests, demos and the web chat.

It speaks the OpenAI chat-completions API (``POST /v1/chat/completions``) and
the Anthropic Messages API (``POST /v1/messages``), whole or streamed (SSE),
on 127.0.0.1. Each API has its own script: a list of ``ScriptedReply``
consumed in order, one per request. A reply is a text, tool calls (parallel,
their streamed fragments in order or interleaved), reasoning / thinking with a
signature, usage, or a failure: an error status (401, 429 with
``retry-after``, 500, 529, a context-length 400), a slow answer, or a stream
cut off mid-way. The server records every request it got
(``server.requests``), so a test can assert what a client sent. With
``strict=True`` it refuses (400, consuming no reply) every request that
``memory.testing.strict`` finds a problem in, as a strict provider would.

In tests::

    with ScriptedServer(openai=[ScriptedReply(text="Hi")]) as server:
        client = OpenAIChatClient(server.openai_base_url, api_key="k")
        ...
        assert server.requests[0].body["messages"][-1]["content"] == "Hello"

From a shell (the script is a JSON file ``{"openai": [...], "anthropic": [...]}``
of ``ScriptedReply`` fields; ``--fallback echo`` answers "echo: <last user
text>" once a script is used up, instead of a 500)::

    python -m memory.testing.scripted_server --port 8765 --script replies.json --strict
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .strict import request_problems

Api = Literal["openai", "anthropic"]
APIS: tuple[Api, ...] = ("openai", "anthropic")
ErrorKind = Literal[
    "bad_key", "rate_limit", "server", "overloaded", "context_length", "bad_request"
]

# Status and provider error wording of each scripted error kind.
_ERRORS: dict[str, dict[str, Any]] = {
    "bad_key": {
        "status": 401,
        "openai": ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
        "anthropic": ("authentication_error", None, "invalid x-api-key"),
    },
    "rate_limit": {
        "status": 429,
        "openai": ("requests", "rate_limit_exceeded", "Rate limit reached for requests."),
        "anthropic": ("rate_limit_error", None, "Number of requests has exceeded your rate limit."),
    },
    "server": {
        "status": 500,
        "openai": ("server_error", None, "The server had an error processing your request."),
        "anthropic": ("api_error", None, "Internal server error"),
    },
    "overloaded": {
        "status": 529,
        "openai": ("server_error", None, "The engine is currently overloaded."),
        "anthropic": ("overloaded_error", None, "Overloaded"),
    },
    "context_length": {
        "status": 400,
        "openai": (
            "invalid_request_error",
            "context_length_exceeded",
            "This model's maximum context length is 8192 tokens. However, your messages "
            "resulted in 9001 tokens. Please reduce the length of the messages.",
        ),
        "anthropic": (
            "invalid_request_error",
            None,
            "prompt is too long: 9001 tokens > 8192 maximum",
        ),
    },
    "bad_request": {
        "status": 400,
        "openai": ("invalid_request_error", None, "Invalid value for 'messages'."),
        "anthropic": ("invalid_request_error", None, "messages: roles must alternate"),
    },
}


@dataclass(frozen=True)
class ScriptedReply:
    """One scripted answer (fields as in a script file).

    A normal reply: ``text``, ``tool_calls`` (``{"id", "name", "arguments"}``,
    ``arguments`` a JSON string or an object), ``reasoning`` (OpenAI:
    ``reasoning_content``; Anthropic: a thinking block signed ``signature``),
    ``redacted_thinking`` (Anthropic: a redacted block's data), ``usage``
    (``input_tokens`` for the whole prompt, ``output_tokens``,
    ``cached_input_tokens``) and ``finish_reason`` (default: ``"tool_calls"``
    with calls, else ``"stop"``; Anthropic names are derived).
    ``interleave_calls`` streams the calls' fragments taking turns, as some
    compatible servers do: OpenAI chunks all on index 0, each fragment with
    its call's id; Anthropic ``tool_use`` blocks all opened first, then their
    deltas in turn. An ``arguments`` string that is not JSON (a call cut off
    at the output limit) is streamed as it is.

    A failure: ``error`` (``bad_key`` 401, ``rate_limit`` 429, ``server`` 500,
    ``overloaded`` 529, ``context_length`` 400, ``bad_request`` 400) with
    ``retry_after`` seconds (sent as ``retry-after-ms`` and ``retry-after``)
    and ``message`` to override the wording. ``delay_s`` waits before
    answering; ``chunk_delay_s`` between stream events; ``pause_s`` once,
    after the first ``pause_after`` stream events; ``cut_after`` ends a
    stream cleanly after that many events, without its terminator; a
    ``stream_error`` kind is then sent as an SSE error event (Anthropic) or
    an ``error`` chunk (OpenAI) before the stream ends.
    """

    text: str = ""
    tool_calls: Sequence[Mapping[str, Any]] = ()
    reasoning: str | None = None
    signature: str = "scripted-signature"
    redacted_thinking: str | None = None
    usage: Mapping[str, int] | None = None
    finish_reason: str | None = None
    error: ErrorKind | None = None
    message: str | None = None
    retry_after: float | None = None
    delay_s: float = 0.0
    chunk_delay_s: float = 0.0
    pause_after: int = 0
    pause_s: float = 0.0
    cut_after: int | None = None
    stream_error: ErrorKind | None = None
    interleave_calls: bool = False

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScriptedReply:
        """Read a script entry; raises ``ValueError`` on an unknown field or error kind."""
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown scripted reply fields: {sorted(unknown)}")
        for key in ("error", "stream_error"):
            if data.get(key) is not None and data[key] not in _ERRORS:
                raise ValueError(f"unknown {key} {data[key]!r}; one of {sorted(_ERRORS)}")
        return cls(**data)

    @property
    def status(self) -> int:
        return int(_ERRORS[self.error]["status"]) if self.error else 200

    def calls(self) -> list[tuple[str, str, str]]:
        """``(id, name, arguments JSON)`` of each scripted call."""
        out = []
        for i, call in enumerate(self.tool_calls):
            args = call.get("arguments", "{}")
            if not isinstance(args, str):
                args = json.dumps(args)
            out.append((str(call.get("id", f"call_{i}")), str(call["name"]), args))
        return out

    def openai_finish(self) -> str:
        return self.finish_reason or ("tool_calls" if self.tool_calls else "stop")

    def anthropic_stop(self) -> str:
        named = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}
        reason = self.openai_finish()
        return named.get(reason, reason)


@dataclass
class RecordedRequest:
    """A request the server got: which API, its headers and JSON body.

    ``disconnected`` turns true when the client went away before the answer
    was complete (a cancelled or timed-out request). ``sent_at``: for a
    stream, the ``time.monotonic()`` at which each of its events was sent (for
    latency measurements: the clock is the machine's, shared by processes).
    """

    api: Api
    path: str
    headers: dict[str, str]
    body: Any
    disconnected: bool = False
    problems: list[str] = field(default_factory=list)
    sent_at: list[float] = field(default_factory=list)


def load_script(path: str | Path) -> dict[Api, list[ScriptedReply]]:
    """Read a script file ``{"openai": [...], "anthropic": [...]}``."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or set(data) - set(APIS):
        raise ValueError(f"a script is an object with the keys {APIS}")
    return {api: [ScriptedReply.from_dict(r) for r in data.get(api, [])] for api in APIS}


class ScriptedServer:
    """The scripted server, run in a thread on 127.0.0.1 (``port=0``: a free one).

    ``openai`` / ``anthropic``: the replies of each API, in order (dicts are
    read with ``ScriptedReply.from_dict``). ``api_key``: when set, a request
    without it (``Authorization: Bearer`` or ``x-api-key``) gets 401 and
    consumes nothing. ``fallback``: what to answer once a script is used up:
    ``"error"`` (a 500 saying so) or ``"echo"``. ``pace_s``: the echo streams
    one piece (8 characters) per ``pace_s`` seconds, with a note on what it
    is, so a person can watch it stream and stop it. ``strict``: refuse with a
    400 ``invalid_request_error`` (listing the problems, also kept in the
    request's ``problems``) every request body ``memory.testing.strict``
    finds fault with; such a request consumes no reply.

    Use it as a context manager, or ``start()`` / ``stop()``.
    """

    def __init__(
        self,
        *,
        openai: Iterable[ScriptedReply | Mapping[str, Any]] = (),
        anthropic: Iterable[ScriptedReply | Mapping[str, Any]] = (),
        api_key: str | None = None,
        fallback: Literal["error", "echo"] = "error",
        pace_s: float = 0.0,
        strict: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self._lock = threading.Lock()
        self.scripts: dict[Api, list[ScriptedReply]] = {"openai": [], "anthropic": []}
        self.add("openai", *openai)
        self.add("anthropic", *anthropic)
        self.api_key = api_key
        self.fallback = fallback
        self.pace_s = pace_s
        self.strict = strict
        self.host = host
        self.port = port
        self.requests: list[RecordedRequest] = []
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._openai, methods=["POST"]),
                Route("/chat/completions", self._openai, methods=["POST"]),
                Route("/v1/messages", self._anthropic, methods=["POST"]),
            ]
        )

    # -- the script ---------------------------------------------------------------

    def add(self, api: Api, *replies: ScriptedReply | Mapping[str, Any]) -> None:
        """Append replies to ``api``'s script (safe while the server runs)."""
        items = [r if isinstance(r, ScriptedReply) else ScriptedReply.from_dict(r) for r in replies]
        with self._lock:
            self.scripts[api].extend(items)

    def requests_for(self, api: Api) -> list[RecordedRequest]:
        """The requests ``api`` got, in order."""
        return [r for r in self.requests if r.api == api]

    def _echo(self, text: str) -> ScriptedReply:
        if not self.pace_s:
            return ScriptedReply(text=f"echo: {text}")
        # At a human pace the echo says what it is, long enough to watch and to Stop.
        return ScriptedReply(text=f"echo: {text}\n\n{PACED_ECHO_NOTE}", chunk_delay_s=self.pace_s)

    def _next(self, api: Api) -> ScriptedReply | None:
        with self._lock:
            return self.scripts[api].pop(0) if self.scripts[api] else None

    # -- running ------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """The ``base_url`` of an OpenAI client."""
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """The ``base_url`` of an Anthropic client."""
        return self.url

    def start(self) -> ScriptedServer:
        """Start serving in a daemon thread; returns once the port accepts connections."""
        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            log_level="warning",
            lifespan="off",
            timeout_graceful_shutdown=1,
            access_log=False,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True, name="scripted-server"
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the scripted server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Stop the server and wait for its thread."""
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=5)
            self._server = self._thread = None

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- endpoints ----------------------------------------------------------------

    async def _openai(self, request: Request) -> Response:
        return await self._answer("openai", request)

    async def _anthropic(self, request: Request) -> Response:
        return await self._answer("anthropic", request)

    async def _answer(self, api: Api, request: Request) -> Response:
        try:
            body = await request.json()
        except json.JSONDecodeError:
            body = None
        record = RecordedRequest(api, request.url.path, dict(request.headers), body)
        self.requests.append(record)
        if self.api_key is not None and self.api_key not in _sent_keys(request):
            return _error_response(api, ScriptedReply(error="bad_key"))
        if self.strict and (problems := request_problems(api, body)):
            record.problems = problems
            refusal = ScriptedReply(error="bad_request", message="; ".join(problems))
            return _error_response(api, refusal)
        reply = self._next(api)
        if reply is None:
            if self.fallback == "echo":
                reply = self._echo(_last_user_text(api, body))
            else:
                return _error_response(
                    api, ScriptedReply(error="server", message=f"the {api} script is used up")
                )
        if reply.delay_s and not await _wait(request, reply.delay_s):
            record.disconnected = True
            return Response(status_code=499)
        if reply.error:
            return _error_response(api, reply)
        model = str((body or {}).get("model", "scripted-model"))
        if not (body or {}).get("stream"):
            build = _openai_body if api == "openai" else _anthropic_body
            return JSONResponse(build(reply, model))
        if api == "openai":
            usage = bool(((body or {}).get("stream_options") or {}).get("include_usage"))
            events = _openai_events(reply, model, include_usage=usage)
        else:
            events = _anthropic_events(reply, model)
        return StreamingResponse(_sse(events, reply, record, api), media_type="text/event-stream")


PACED_ECHO_NOTE = (
    "I am the scripted echo model: I repeat each message back, a few words at a time, "
    "so that you can watch a reply stream in and stop it half-way."
)


def _sent_keys(request: Request) -> set[str]:
    auth = request.headers.get("authorization", "")
    keys = {request.headers.get("x-api-key", "")}
    if auth.lower().startswith("bearer "):
        keys.add(auth[7:])
    return keys - {""}


def _last_user_text(api: Api, body: Any) -> str:
    for message in reversed((body or {}).get("messages") or []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        texts = [p.get("text", "") for p in content or [] if p.get("type") == "text"]
        if texts:
            return " ".join(texts)
    return ""


async def _wait(request: Request, seconds: float) -> bool:
    """Sleep ``seconds``; ``False`` as soon as the client disconnects."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        if await request.is_disconnected():
            return False
        await asyncio.sleep(min(left, 0.02))
    return True


def _error_body(api: Api, kind: str, message: str | None) -> dict[str, Any]:
    err_type, code, default = _ERRORS[kind][api]
    text = message or default
    if api == "openai":
        return {"error": {"message": text, "type": err_type, "param": None, "code": code}}
    return {"type": "error", "error": {"type": err_type, "message": text}}


def _error_response(api: Api, reply: ScriptedReply) -> Response:
    assert reply.error is not None
    headers = {}
    if reply.retry_after is not None:
        headers["retry-after-ms"] = str(round(reply.retry_after * 1000))
        headers["retry-after"] = str(math.ceil(reply.retry_after))
    # The SDKs retry whatever they may; tests decide when to stop, by the script.
    return JSONResponse(
        _error_body(api, reply.error, reply.message), status_code=reply.status, headers=headers
    )


def _pieces(text: str, size: int = 8) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _usage_numbers(reply: ScriptedReply) -> tuple[int, int, int]:
    usage = reply.usage or {}
    return (
        int(usage.get("input_tokens", 10)),
        int(usage.get("output_tokens", 5)),
        int(usage.get("cached_input_tokens", 0)),
    )


# -- OpenAI ---------------------------------------------------------------------


def _openai_usage(reply: ScriptedReply) -> dict[str, Any]:
    prompt, completion, cached = _usage_numbers(reply)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def _openai_body(reply: ScriptedReply, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in reply.calls()
        ]
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": reply.openai_finish()}],
        "usage": _openai_usage(reply),
    }


def _openai_events(reply: ScriptedReply, model: str, *, include_usage: bool) -> list[str]:
    head = {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return f"data: {json.dumps({**head, 'created': 0, 'choices': [choice]})}\n\n"

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"reasoning_content": p}) for p in _pieces(reply.reasoning or "")]
    events += [chunk({"content": p}) for p in _pieces(reply.text)]
    fragments: list[list[dict[str, Any]]] = []
    shared = reply.interleave_calls  # every call on index 0, told apart by its id only
    for index, (call_id, name, args) in enumerate(reply.calls()):
        at = 0 if shared else index
        again = {"id": call_id} if shared else {}
        first = {"name": name, "arguments": ""}
        own = [{"index": at, "id": call_id, "type": "function", "function": first}]
        own += [{"index": at, **again, "function": {"arguments": p}} for p in _pieces(args)]
        fragments.append(own)
    events += [chunk({"tool_calls": [f]}) for f in _in_turn(fragments, reply.interleave_calls)]
    events.append(chunk({}, reply.openai_finish()))
    if include_usage:
        data = {**head, "created": 0, "choices": [], "usage": _openai_usage(reply)}
        events.append(f"data: {json.dumps(data)}\n\n")
    events.append("data: [DONE]\n\n")
    return events


# -- Anthropic ------------------------------------------------------------------


def _anthropic_usage(reply: ScriptedReply) -> dict[str, Any]:
    prompt, completion, cached = _usage_numbers(reply)
    return {
        "input_tokens": prompt - cached,
        "output_tokens": completion,
        "cache_read_input_tokens": cached,
        "cache_creation_input_tokens": 0,
    }


def _in_turn(groups: Sequence[Sequence[Any]], interleave: bool) -> list[Any]:
    """The items of ``groups`` one group after another, or taking turns."""
    if not interleave:
        return [item for group in groups for item in group]
    out = []
    for depth in range(max((len(g) for g in groups), default=0)):
        out += [g[depth] for g in groups if depth < len(g)]
    return out


def _input(arguments: str) -> Any:
    """A call's ``input``: its arguments parsed, or ``{}`` for text that is not JSON."""
    try:
        return json.loads(arguments)
    except json.JSONDecodeError:
        return {}


def _anthropic_blocks(reply: ScriptedReply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.reasoning is not None:
        blocks.append(
            {"type": "thinking", "thinking": reply.reasoning, "signature": reply.signature}
        )
    if reply.redacted_thinking is not None:
        blocks.append({"type": "redacted_thinking", "data": reply.redacted_thinking})
    if reply.text:
        blocks.append({"type": "text", "text": reply.text})
    for call_id, name, args in reply.calls():
        blocks.append({"type": "tool_use", "id": call_id, "name": name, "input": _input(args)})
    return blocks


def _anthropic_body(reply: ScriptedReply, model: str) -> dict[str, Any]:
    return {
        "id": "msg_scripted",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _anthropic_blocks(reply),
        "stop_reason": reply.anthropic_stop(),
        "stop_sequence": None,
        "usage": _anthropic_usage(reply),
    }


def _anthropic_events(reply: ScriptedReply, model: str) -> list[str]:
    def event(data: dict[str, Any]) -> str:
        return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n"

    usage = _anthropic_usage(reply)
    start = {**_anthropic_body(reply, model), "content": [], "stop_reason": None}
    start["usage"] = {**usage, "output_tokens": 1}
    events = [event({"type": "message_start", "message": start}), event({"type": "ping"})]
    arguments = iter(args for _, _, args in reply.calls())
    calls: list[list[str]] = []
    for index, block in enumerate(_anthropic_blocks(reply)):
        kind = block["type"]
        opening: dict[str, Any] = {
            "thinking": {"type": "thinking", "thinking": "", "signature": ""},
            "text": {"type": "text", "text": ""},
            "tool_use": {**block, "input": {}},
        }.get(kind, block)
        started = event({"type": "content_block_start", "index": index, "content_block": opening})
        deltas: list[dict[str, Any]] = []
        if kind == "thinking":
            deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(block["thinking"])]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "text":
            deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"])]
        elif kind == "tool_use":
            raw = next(arguments)
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in _pieces(raw)]
        own = [event({"type": "content_block_delta", "index": index, "delta": d}) for d in deltas]
        stopped = event({"type": "content_block_stop", "index": index})
        if kind == "tool_use" and reply.interleave_calls:
            events.append(started)
            calls.append([*own, stopped])
        else:
            events += [started, *own, stopped]
    events += _in_turn(calls, interleave=True)
    events.append(
        event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": reply.anthropic_stop(), "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            }
        )
    )
    events.append(event({"type": "message_stop"}))
    return events


async def _sse(
    events: list[str], reply: ScriptedReply, record: RecordedRequest, api: Api
) -> AsyncIterator[str]:
    if reply.cut_after is not None:
        events = events[: reply.cut_after]
        if reply.stream_error is not None:
            body = _error_body(api, reply.stream_error, reply.message)
            prefix = "event: error\n" if api == "anthropic" else ""
            events.append(f"{prefix}data: {json.dumps(body)}\n\n")
    try:
        for index, item in enumerate(events, start=1):
            record.sent_at.append(time.monotonic())
            yield item
            if reply.chunk_delay_s:
                await asyncio.sleep(reply.chunk_delay_s)
            if reply.pause_s and index == reply.pause_after:
                await asyncio.sleep(reply.pause_s)
    except (asyncio.CancelledError, GeneratorExit):
        record.disconnected = True
        raise


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m memory.testing.scripted_server``: serve a script until Ctrl-C."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--script", help="JSON file {'openai': [...], 'anthropic': [...]}")
    parser.add_argument("--api-key", help="answer 401 to requests without this key")
    parser.add_argument("--fallback", choices=["error", "echo"], default="echo")
    parser.add_argument(
        "--pace",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="stream the echo one 8-character piece every SECONDS (0.08: a human pace)",
    )
    parser.add_argument(
        "--strict", action="store_true", help="refuse (400) requests a strict provider would"
    )
    args = parser.parse_args(argv)
    script = load_script(args.script) if args.script else {"openai": [], "anthropic": []}
    server = ScriptedServer(
        openai=script["openai"],
        anthropic=script["anthropic"],
        api_key=args.api_key,
        fallback=args.fallback,
        pace_s=args.pace,
        strict=args.strict,
        host=args.host,
        port=args.port,
    )
    server.start()
    print(f"OpenAI base_url:    {server.openai_base_url}", flush=True)
    print(f"Anthropic base_url: {server.anthropic_base_url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
