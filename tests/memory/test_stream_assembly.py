"""Streamed tool calls are reassembled into the calls that were sent, whatever
the layout of their fragments (issue 18: parallel calls sharing one index and
told apart by their ids were glued together), for both APIs."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import httpx2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory import AnthropicClient, ChatMessage, CompletionDone, OpenAIChatClient, ToolCallStart
from memory.clients.base import ChatStreamEvent

HELLO = [ChatMessage.user("Weather and time in Lisbon?")]
NAMES = ["weather", "local_time", "calculator", "search"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def sent_calls(draw: st.DrawFn) -> list[tuple[str, str, str]]:
    """1 to 4 parallel calls: (id, name, arguments as the model wrote them)."""
    count = draw(st.integers(1, 4))
    calls = []
    for i in range(count):
        arguments = draw(st.dictionaries(st.text(min_size=1, max_size=8), json_values, max_size=3))
        text = json.dumps(arguments, ensure_ascii=draw(st.booleans()))
        if not arguments and draw(st.booleans()):
            text = ""  # a call without arguments may stream none
        calls.append((f"call_{i}_{draw(st.integers(0, 999))}", draw(st.sampled_from(NAMES)), text))
    return calls


def split(draw: st.DrawFn, text: str) -> list[str]:
    """``text`` in pieces at random cuts (inside escapes and characters too)."""
    if not text:
        return []
    cuts = sorted(draw(st.sets(st.integers(1, max(len(text) - 1, 1)), max_size=6)))
    bounds = [0, *[c for c in cuts if c < len(text)], len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if a < b]


def interleave(draw: st.DrawFn, groups: list[list[Any]]) -> list[Any]:
    """The items of ``groups`` merged in a random order that keeps each group's own."""
    slots = [g for g, group in enumerate(groups) for _ in group]
    order = draw(st.permutations(slots))
    positions = [0] * len(groups)
    out = []
    for g in order:
        out.append(groups[g][positions[g]])
        positions[g] += 1
    return out


# -- OpenAI -------------------------------------------------------------------------

# How servers lay out the fragments of parallel calls; the first two may interleave.
OPENAI_LAYOUTS = [
    "own index",  # OpenAI: each call its index, the id on its first fragment only
    "shared index, id on every fragment",
    "no index, id on every fragment",
    "shared index, id first, one call after another",
    "no index, id first, one call after another",
]


def openai_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [choice],
    }


@st.composite
def openai_streams(draw: st.DrawFn) -> tuple[list[tuple[str, str, str]], list[dict[str, Any]]]:
    calls = draw(sent_calls())
    layout = draw(st.sampled_from(OPENAI_LAYOUTS))
    groups = []
    for i, (call_id, name, arguments) in enumerate(calls):
        pieces = split(draw, arguments)
        index: dict[str, Any] = {"index": 0 if "shared" in layout else i}
        if layout.startswith("no index"):
            index = {}
        first: dict[str, Any] = {**index, "id": call_id, "type": "function"}
        first["function"] = {"name": name}
        at_once = draw(st.booleans())
        if pieces and at_once:
            first["function"]["arguments"] = pieces.pop(0)  # some servers start at once
        again = {"id": call_id} if "every fragment" in layout else {}
        rest = [{**index, **again, "function": {"arguments": p}} for p in pieces]
        groups.append([first, *rest])
    mixed = "one call after another" not in layout
    fragments = interleave(draw, groups) if mixed else [f for g in groups for f in g]
    chunks = [openai_chunk({"role": "assistant", "content": None})]
    chunks += [openai_chunk({"tool_calls": [f]}) for f in fragments]
    chunks.append(openai_chunk({}, "tool_calls"))
    order = sorted(range(len(calls)), key=lambda i: fragments.index(groups[i][0]))
    return [calls[i] for i in order], chunks


def sse(chunks: list[dict[str, Any]]) -> bytes:
    return "".join([*(f"data: {json.dumps(c)}\n\n" for c in chunks), "data: [DONE]\n\n"]).encode()


def stream_through(client: Any) -> list[ChatStreamEvent]:
    async def run() -> list[ChatStreamEvent]:
        return [e async for e in client.stream(model="m", messages=HELLO)]

    return asyncio.run(run())


def mock_http(body: bytes) -> httpx2.AsyncClient:
    def respond(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    return httpx2.AsyncClient(transport=httpx2.MockTransport(respond))


def assembled(events: list[ChatStreamEvent]) -> list[tuple[str, str, str]]:
    done = events[-1]
    assert isinstance(done, CompletionDone)
    starts = [e.index for e in events if isinstance(e, ToolCallStart)]
    assert starts == list(range(len(starts)))
    return [(c.id, c.name, c.arguments) for c in done.completion.message.tool_calls]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=openai_streams())
def test_openai_fragments_in_any_layout_reassemble_to_the_calls_sent(
    stream: tuple[list[tuple[str, str, str]], list[dict[str, Any]]],
) -> None:
    calls, chunks = stream
    client = OpenAIChatClient(
        "http://model.test/v1", api_key="k", http_client=mock_http(sse(chunks))
    )
    got = assembled(stream_through(client))
    assert got == calls
    assert all(json.loads(arguments or "{}") is not None for _, _, arguments in got)


def test_two_calls_sharing_index_zero_with_interleaved_fragments_stay_two() -> None:
    # The shape of the report: {"expression": {"timezone": "6*7"}"UTC"} and six calls.
    fragments = [
        {"index": 0, "id": "a", "type": "function", "function": {"name": "calculator"}},
        {"index": 0, "id": "b", "type": "function", "function": {"name": "local_time"}},
        {"index": 0, "id": "a", "function": {"arguments": '{"expression": '}},
        {"index": 0, "id": "b", "function": {"arguments": '{"timezone": '}},
        {"index": 0, "id": "a", "function": {"arguments": '"6*7"}'}},
        {"index": 0, "id": "b", "function": {"arguments": '"UTC"}'}},
    ]
    chunks = [openai_chunk({"tool_calls": [f]}) for f in fragments] + [
        openai_chunk({}, "tool_calls")
    ]
    client = OpenAIChatClient(
        "http://model.test/v1", api_key="k", http_client=mock_http(sse(chunks))
    )
    assert assembled(stream_through(client)) == [
        ("a", "calculator", '{"expression": "6*7"}'),
        ("b", "local_time", '{"timezone": "UTC"}'),
    ]


# -- Anthropic ----------------------------------------------------------------------


def anthropic_event(data: dict[str, Any]) -> str:
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n"


@st.composite
def anthropic_streams(draw: st.DrawFn) -> tuple[list[tuple[str, str, str]], bytes]:
    calls = draw(sent_calls())
    reuse_index = draw(st.booleans())  # a server that opens every block at index 0
    start = {
        "type": "message_start",
        "message": {
            "id": "msg",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        },
    }
    groups = []
    offset = 0
    if draw(st.booleans()):
        groups.append(
            [
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": "Checking."},
                },
                {"type": "content_block_stop", "index": 0},
            ]
        )
        offset = 1
    for i, (call_id, name, arguments) in enumerate(calls):
        index = 0 if reuse_index else i + offset
        block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
        group = [{"type": "content_block_start", "index": index, "content_block": block}]
        group += [
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "input_json_delta", "partial_json": p},
            }
            for p in split(draw, arguments)
        ]
        group.append({"type": "content_block_stop", "index": index})
        groups.append(group)
    events = [e for g in groups for e in g] if reuse_index else interleave(draw, groups)
    stop = [
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 9},
        },
        {"type": "message_stop"},
    ]
    body = "".join(anthropic_event(e) for e in [start, *events, *stop]).encode()
    call_groups = groups[offset:]
    order = sorted(range(len(calls)), key=lambda i: events.index(call_groups[i][0]))
    expected = [(calls[i][0], calls[i][1], calls[i][2] or "{}") for i in order]
    return expected, body


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=anthropic_streams())
def test_anthropic_blocks_in_any_interleaving_reassemble_to_the_calls_sent(
    stream: tuple[list[tuple[str, str, str]], bytes],
) -> None:
    calls, body = stream
    client = AnthropicClient("http://model.test", api_key="k", http_client=mock_http(body))
    assert assembled(stream_through(client)) == calls
