"""Claude Code transcripts: ``~/.claude/projects/<project>/<session>.jsonl``.

Each line is one event. ``user`` and ``assistant`` lines carry an Anthropic
message; progress, file-history snapshots, queue operations, hook and command
``system`` lines and ``isMeta`` lines (caveats Claude Code adds) are not part of
the conversation and are only counted. Lines form a tree through ``parentUuid``:
the active conversation is the path from the last message line back to the root,
so after a rewind the abandoned path becomes a branch. Claude Code writes one
API message as one line per content block, all with the same ``message.id``
(and parallel tool calls hang their results off different block lines), so the
lines of one message are merged and the results of its calls kept wherever they
hang. A ``system`` line with ``subtype: "compact_boundary"`` followed by the
``isCompactSummary`` user line is a compaction. Subagent transcripts
(``<session>/subagents/agent-*.jsonl``) are parsed as children.

Memory: the message lines of one session (its tree) are held; other lines keep
only their ids. With a message cap (an upload's), reading stops at the first
message line past it, so what is held stays within the cap whatever the file's
length; the conversation read before it is imported and the stop reported with
its line and byte offset. A compressed file that expands past its bound
(``PlainTooLarge``) likewise hands over what was read before, then raises.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO

from ._blocks import BlockMapper, usage_input_tokens
from ._io import PlainTooLarge, capped, json_lines, kind
from .model import FormatError, FormatProblem, ParsedCompaction, ParsedSession, named_model

FORMAT = "claude-code"
# A current model of the tool's provider: it counts a session whose file names none.
ESTIMATE_MODEL = "claude-sonnet-4-5"
MESSAGE_TYPES = frozenset({"user", "assistant"})
COMPACT_BOUNDARY = "compact_boundary"
AUTOCOMPACT_BUFFER = 33_000  # tokens Claude Code 2.x keeps free: it compacts at window - this
# Same on every line of a session, so kept once on the session, and on a
# message only where it differs (a version upgrade or a branch switch mid-session).
SESSION_KEYS = (
    "sessionId",
    "version",
    "cwd",
    "gitBranch",
    "userType",
    "isSidechain",
    "slug",
    "agentId",
)


@dataclass
class _Node:
    number: int
    uuid: str
    parent: str | None  # the parent to follow, after compact boundaries
    parent_given: bool  # the line has a parentUuid key at all (old files do not)
    record: dict[str, Any] | None  # kept for message lines and compact boundaries


@dataclass
class _Tree:
    nodes: dict[str, _Node] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)  # uuids in file order
    position: dict[str, int] = field(default_factory=dict)
    message_lines: int = 0
    stopped: FormatProblem | None = None  # why reading stopped before the file's end
    too_large: PlainTooLarge | None = None  # the file expanded past its bound there
    skipped: dict[str, int] = field(default_factory=dict)
    titles: list[tuple[str | None, str]] = field(default_factory=list)  # (leafUuid, summary)
    custom_title: str | None = None
    first: dict[str, Any] | None = None


def parse(
    stream: BinaryIO,
    source: str,
    subagents: Iterable[tuple[BinaryIO, str]] = (),
    max_messages: int | None = None,
) -> Iterator[ParsedSession | FormatProblem]:
    """Yield the session in ``stream`` (one per file), or the problems that refuse it.

    ``subagents`` are the ``(stream, name)`` of its subagent transcripts; each
    becomes a child session, and a bad one is reported without refusing the parent.
    ``max_messages`` (an upload's cap, messages): reading stops at the first
    message line past it; the session read before is yielded, cut to the cap and
    without its branches, after a problem naming the line and byte offset of
    the stop. Raises ``PlainTooLarge`` after yielding what was read before the
    stream's bound, when the stream is a ``Bounded`` one.
    """
    tree, problems, damaged = _read(stream, source, max_messages)
    yield from capped(damaged, source)
    if tree.too_large is not None and tree.first is None:
        raise tree.too_large  # nothing of the conversation came before the bound
    if problems:
        yield from capped(problems, source)
        if tree.too_large is not None:
            raise tree.too_large
        return
    children: list[ParsedSession] = []
    for child_stream, child_name in subagents:
        for item in parse(child_stream, child_name):
            if isinstance(item, FormatProblem):
                yield item
            else:
                children.append(item)
    try:
        session = _session(tree, source, children)
    except FormatError as error:
        yield error.problem(source)
        if tree.too_large is not None:
            raise tree.too_large from None
        return
    missing = session.extra.get("missing_parents")
    if missing and damaged:
        yield FormatProblem(
            source,
            "",
            f"{missing:,} lines name a parent that is not in the file (a damaged line): "
            "each was joined to the line written before it",
            warning=True,
        )
    if tree.stopped is not None:
        yield tree.stopped
        if max_messages is not None:
            session = _cut(session, max_messages)
    yield session
    if tree.too_large is not None:
        raise tree.too_large


def _cut(session: ParsedSession, limit: int) -> ParsedSession:
    """The first ``limit`` messages of a session whose reading stopped at the cap
    (a user line of several tool results is several messages), without branches:
    they hang off lines past what was read."""
    session.extra.pop("branch_forks", None)
    return replace(
        session,
        messages=session.messages[:limit],
        provider_input_tokens={
            at: tokens for at, tokens in session.provider_input_tokens.items() if at < limit
        },
        compactions=[c for c in session.compactions if c.at <= limit],
        branches=[],
    )


def subagent_files(path: Path) -> list[Path]:
    """The subagent transcripts Claude Code keeps beside a session file, in name order."""
    return sorted((path.parent / path.stem / "subagents").glob("agent-*.jsonl"))


def _read(
    stream: BinaryIO, source: str, max_messages: int | None = None
) -> tuple[_Tree, list[FormatProblem], list[FormatProblem]]:
    """The tree of the file's lines, the problems that refuse it, and the damaged
    lines skipped (warnings: Claude Code itself skips them on resume).

    Reading stops (``tree.stopped``) at the first message line past
    ``max_messages``, and (``tree.too_large``) where the stream's bound is met."""
    tree = _Tree()
    problems: list[FormatProblem] = []
    damaged: list[FormatProblem] = []
    lines = json_lines(stream)
    start = stream.tell()  # where the line being read starts (bytes of plain text)
    while True:
        try:
            number, item = next(lines)
        except StopIteration:
            break
        except PlainTooLarge as error:
            tree.too_large = error
            break
        if max_messages is not None and _is_message(item):
            tree.message_lines += 1
            if tree.message_lines > max_messages:
                tree.stopped = FormatProblem(
                    source,
                    f"line {number}",
                    f"the file holds more than {max_messages:,} messages, the most an upload "
                    f"may hold: reading stopped at byte {start:,}, the messages before it "
                    "are imported; import the whole file on the server with "
                    "`manage.py import_sessions FILE`",
                )
                break
        start = stream.tell()
        if isinstance(item, str):
            damaged.append(FormatProblem(source, f"line {number}", item, warning=True))
            continue
        kind_ = item.get("type")
        if not isinstance(kind_, str):
            problems.append(
                FormatProblem(
                    source, f"line {number}", f"expected a string, got {kind(kind_)}", "type"
                )
            )
            continue
        try:
            _take(tree, number, kind_, item)
        except FormatError as error:
            problems.append(error.problem(source))
    if (
        not problems
        and tree.too_large is None
        and not any(
            node.record is not None and node.record.get("type") in MESSAGE_TYPES
            for node in tree.nodes.values()
        )
    ):
        why = "no user or assistant line: no conversation to import"
        if damaged:
            why = f"no line could be read but damaged ones ({len(damaged):,}): {why}"
        problems.append(FormatProblem(source, "", why))
    return tree, problems, damaged


def _is_message(item: dict[str, Any] | str) -> bool:
    """A conversation line that becomes at least one message (not a caveat line)."""
    return isinstance(item, dict) and item.get("type") in MESSAGE_TYPES and not item.get("isMeta")


def _take(tree: _Tree, number: int, kind_: str, item: dict[str, Any]) -> None:
    where = f"line {number}"
    if kind_ == "summary" and isinstance(item.get("summary"), str):
        leaf = item.get("leafUuid")
        tree.titles.append((leaf if isinstance(leaf, str) else None, item["summary"]))
    if kind_ == "custom-title" and isinstance(item.get("customTitle"), str):
        tree.custom_title = item["customTitle"]
    keep = kind_ in MESSAGE_TYPES or (kind_ == "system" and item.get("subtype") == COMPACT_BOUNDARY)
    if kind_ in MESSAGE_TYPES:
        message = item.get("message")
        if not isinstance(message, dict):
            raise FormatError(where, f"expected an object, got {kind(message)}", "message")
        if tree.first is None:
            tree.first = item
    else:
        label = f"{kind_}/{item['subtype']}" if isinstance(item.get("subtype"), str) else kind_
        if not keep:
            tree.skipped[label] = tree.skipped.get(label, 0) + 1
    uuid = item.get("uuid")
    if not isinstance(uuid, str) or not uuid:
        if not keep:
            return  # a line outside the tree (summary, snapshot)
        uuid = f"line-{number}"
    parent = item.get("parentUuid")
    if parent is None and isinstance(item.get("logicalParentUuid"), str):
        parent = item["logicalParentUuid"]  # a compact boundary continues its conversation
    if parent is not None and not isinstance(parent, str):
        raise FormatError(where, f"expected a string or null, got {kind(parent)}", "parentUuid")
    node = _Node(number, uuid, parent, "parentUuid" in item, item if keep else None)
    if uuid not in tree.nodes:
        tree.position[uuid] = len(tree.order)
        tree.order.append(uuid)
    tree.nodes[uuid] = node


def _chain(tree: _Tree, leaf: str) -> tuple[list[str], int]:
    """Uuids from ``leaf`` back to the root, and how many parents were missing.

    A parent that is not in the file (a line removed, a subagent's link into
    its parent session) is taken to be the line written just before; a file
    without ``parentUuid`` at all is read in file order.
    """
    chain: list[str] = []
    seen: set[str] = set()
    missing = 0
    current: str | None = leaf
    while current is not None and current not in seen:
        seen.add(current)
        chain.append(current)
        node = tree.nodes[current]
        parent = node.parent
        if parent is None and node.parent_given:
            break
        if parent is None or parent not in tree.nodes:
            missing += parent is not None
            index = tree.position[current]
            parent = tree.order[index - 1] if index > 0 else None
        current = parent
    return chain, missing


def _message_id(record: dict[str, Any]) -> str | None:
    message = record.get("message") if record.get("type") == "assistant" else None
    message_id = message.get("id") if isinstance(message, dict) else None
    return message_id if isinstance(message_id, str) and message_id else None


def _blocks(record: dict[str, Any]) -> list[Any]:
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, list) else []


def _ids(record: dict[str, Any] | None, block_type: str, key: str) -> Iterator[str]:
    """The ``key`` of each ``block_type`` block of a line (call ids, answered ids)."""
    for block in _blocks(record or {}):
        if isinstance(block, dict) and block.get("type") == block_type:
            value = block.get(key)
            if isinstance(value, str):
                yield value


def _active(tree: _Tree, chain: list[str], claimed: set[str] | None = None) -> list[_Node]:
    """The message lines of a path: the chain, the other lines of its messages, their results."""
    on_chain = {uuid for uuid in chain if tree.nodes[uuid].record is not None}
    message_ids = {_message_id(tree.nodes[u].record or {}) for u in on_chain} - {None}
    lines = [node for node in tree.nodes.values() if node.record is not None]
    active = on_chain | {
        n.uuid
        for n in lines
        if n.record and n.record.get("type") == "assistant" and _message_id(n.record) in message_ids
    }
    calls = {i for uuid in active for i in _ids(tree.nodes[uuid].record, "tool_use", "id")}
    answered = {
        i for uuid in active for i in _ids(tree.nodes[uuid].record, "tool_result", "tool_use_id")
    }
    for node in lines:
        if node.uuid in active or not node.record or node.record.get("type") != "user":
            continue
        ids = set(_ids(node.record, "tool_result", "tool_use_id"))
        if ids and ids <= calls and not ids & answered:
            active.add(node.uuid)
            answered |= ids
    if claimed is not None:
        claimed |= active
    return sorted((tree.nodes[uuid] for uuid in active), key=lambda node: node.number)


@dataclass
class _Built:
    messages: list[dict[str, Any]] = field(default_factory=list)
    compactions: list[ParsedCompaction] = field(default_factory=list)
    tokens: dict[int, int] = field(default_factory=dict)
    meta_lines: int = 0
    mapper: BlockMapper = field(default_factory=BlockMapper)


def _build(nodes: list[_Node], session: dict[str, Any]) -> _Built:
    built = _Built()
    groups: dict[str, list[dict[str, Any]]] = {}
    ordered: list[tuple[int, list[dict[str, Any]]]] = []
    for node in nodes:
        record = node.record or {}
        message_id = _message_id(record)
        if message_id is not None and message_id in groups:
            groups[message_id].append(record)
            continue
        group = [record]
        if message_id is not None:
            groups[message_id] = group
        ordered.append((node.number, group))
    boundary: tuple[int, dict[str, Any]] | None = None
    for number, group in ordered:
        first = group[0]
        if first.get("type") == "system":
            boundary = (number, first)
            continue
        if first.get("isMeta"):
            built.meta_lines += 1
            continue
        if first.get("isCompactSummary"):
            built.compactions.append(_compaction(len(built.messages), first, boundary, session))
            boundary = None
            continue
        if boundary is not None:  # a boundary whose summary line is missing
            built.compactions.append(_compaction(len(built.messages), None, boundary, session))
            boundary = None
        _add(built, number, group, session)
    if boundary is not None:
        built.compactions.append(_compaction(len(built.messages), None, boundary, session))
    return built


def _add(built: _Built, number: int, group: list[dict[str, Any]], session: dict[str, Any]) -> None:
    last = group[-1]["message"]
    fields = {
        k: v for line in group for k, v in line["message"].items() if k not in ("role", "content")
    }
    if len(group) > 1:
        content: Any = [block for line in group for block in _blocks(line)]
    else:
        content = group[0]["message"].get("content")
    extra = {**fields, "claude_code": [_meta(line, session) for line in group]}
    index = len(built.messages)
    built.messages += built.mapper.message(
        group[0]["message"].get("role", group[0].get("type")),
        content,
        extra,
        f"line {number}",
        "message",
    )
    tokens = usage_input_tokens(last.get("usage"))
    if group[0].get("type") == "assistant" and tokens is not None:
        built.tokens[index] = tokens


def _meta(line: dict[str, Any], session: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v
        for k, v in line.items()
        if k != "message" and not (k in SESSION_KEYS and session.get(k) == v)
    }


def _compaction(
    at: int,
    summary_line: dict[str, Any] | None,
    boundary: tuple[int, dict[str, Any]] | None,
    session: dict[str, Any],
) -> ParsedCompaction:
    metadata = boundary[1].get("compactMetadata") if boundary else None
    metadata = metadata if isinstance(metadata, dict) else {}
    summary = ""
    if summary_line is not None:
        content = summary_line["message"].get("content")
        if isinstance(content, str):
            summary = content
        elif isinstance(content, list):
            summary = "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    extra: dict[str, Any] = {}
    if boundary is not None:
        extra["boundary"] = _meta(boundary[1], session)
    if summary_line is not None:
        extra["summary_line"] = _meta(summary_line, session)
    trigger = metadata.get("trigger")
    tokens = metadata.get("preTokens")
    return ParsedCompaction(
        at=at,
        summary=summary,
        trigger=trigger if isinstance(trigger, str) else None,
        tokens_before=tokens if isinstance(tokens, int) else None,
        replacement=None,
        extra=extra,
    )


def _leaves(tree: _Tree, main_sidechain: bool) -> list[str]:
    """Message lines nothing else hangs from, in file order."""
    parents = {node.parent for node in tree.nodes.values()}
    return [
        uuid
        for uuid in tree.order
        if (record := tree.nodes[uuid].record) is not None
        and record.get("type") in MESSAGE_TYPES
        and bool(record.get("isSidechain")) == main_sidechain
        and uuid not in parents
    ]


def _session(tree: _Tree, source: str, children: list[ParsedSession]) -> ParsedSession:
    first = tree.first or {}
    session = {k: first[k] for k in SESSION_KEYS if k in first}
    sidechain = {
        uuid: bool(record.get("isSidechain"))
        for uuid in tree.order
        if (record := tree.nodes[uuid].record) is not None and record.get("type") in MESSAGE_TYPES
    }
    # A subagent's own file is all sidechain; a session's file follows its main line.
    main_sidechain = all(sidechain.values())
    leaf = [uuid for uuid, side in sidechain.items() if side == main_sidechain][-1]
    chain, missing = _chain(tree, leaf)
    claimed: set[str] = set()
    built = _build(_active(tree, chain, claimed), session)
    branches: list[list[dict[str, Any]]] = []
    forks: list[int] = []
    for other in _leaves(tree, main_sidechain):
        if other in claimed:
            continue
        branch = _build(_active(tree, _chain(tree, other)[0], claimed), session).messages
        shared = _shared(branch, built.messages)
        if len(branch) > shared:
            branches.append(branch)
            forks.append(shared)
    children = [*children, *_sidechains(tree, session, claimed, main_sidechain, source)]
    active_uuids = set(chain)
    titles = [text for leaf_uuid, text in tree.titles if leaf_uuid in active_uuids] or [
        text for _, text in tree.titles
    ]
    extra: dict[str, Any] = {"claude_code": session, "skipped_lines": tree.skipped}
    if built.meta_lines:
        extra["meta_lines"] = built.meta_lines
    if missing:
        extra["missing_parents"] = missing
    if forks:
        extra["branch_forks"] = forks
    if built.mapper.unpaired_results:
        extra["unpaired_results"] = built.mapper.unpaired_results
    if built.mapper.pending:
        extra["unanswered_calls"] = len(built.mapper.pending)
    extra["context_limits"] = context_limits(built.compactions)
    agent_id = session.get("agentId")
    if isinstance(agent_id, str):
        extra["parent_session_id"] = session.get("sessionId")
    _link_children(children, built.messages)
    original = agent_id if isinstance(agent_id, str) else session.get("sessionId")
    timestamp = first.get("timestamp")
    return ParsedSession(
        source_format=FORMAT,
        source_tool=_tool(session),
        original_id=original if isinstance(original, str) else Path(source).stem,
        title=tree.custom_title or (titles[-1] if titles else None),
        created_at=timestamp if isinstance(timestamp, str) else None,
        system_prompt=None,
        messages=built.messages,
        provider_input_tokens=built.tokens,
        compactions=built.compactions,
        branches=branches,
        children=children,
        extra=extra,
        model=_model(built.messages),
    )


def context_limits(compactions: list[ParsedCompaction]) -> dict[str, Any]:
    """The window and auto-compact trigger Claude Code ran this session with, in tokens.

    Claude Code keeps a 200,000-token window (1,000,000 with a ``[1m]`` model,
    which a transcript shows only by compacting past 200,000) and compacts
    automatically ``AUTOCOMPACT_BUFFER`` tokens before its end, the "Autocompact
    buffer" its ``/context`` command shows (output room plus a margin).
    """
    before = [c.tokens_before for c in compactions if c.tokens_before]
    window = 1_000_000 if any(t > 200_000 for t in before) else 200_000
    source = (
        f"Claude Code's window of {window:,} tokens, compacting automatically "
        f"{AUTOCOMPACT_BUFFER:,} before its end"
    )
    auto = [c.tokens_before for c in compactions if c.trigger == "auto" and c.tokens_before]
    if auto:
        source += f"; this session compacted itself at {auto[-1]:,} tokens"
    return {"window": window, "threshold": window - AUTOCOMPACT_BUFFER, "source": source}


def _sidechains(
    tree: _Tree, session: dict[str, Any], claimed: set[str], main_sidechain: bool, source: str
) -> list[ParsedSession]:
    """Subagent transcripts that older Claude Code versions wrote into the session's own file."""
    if main_sidechain:
        return []
    found: list[ParsedSession] = []
    for leaf in _leaves(tree, main_sidechain=True):
        if leaf in claimed:
            continue
        chain = [u for u in _chain(tree, leaf)[0] if _sidechain(tree, u)]
        built = _build(_active(tree, chain, claimed), session)
        if not built.messages:
            continue
        number = len(found) + 1
        found.append(
            ParsedSession(
                source_format=FORMAT,
                source_tool=_tool(session),
                original_id=f"{session.get('sessionId', Path(source).stem)}/sidechain-{number}",
                title=None,
                created_at=None,
                system_prompt=None,
                messages=built.messages,
                provider_input_tokens=built.tokens,
                extra={"sidechain": True, "parent_session_id": session.get("sessionId")},
                model=_model(built.messages),
            )
        )
    return found


def _sidechain(tree: _Tree, uuid: str) -> bool:
    record = tree.nodes[uuid].record
    return record is not None and bool(record.get("isSidechain"))


def _model(messages: list[dict[str, Any]]) -> str | None:
    """The model of the last assistant message that names one (``message.model``)."""
    return named_model(m.get("model") for m in messages if m["role"] == "assistant")


def _tool(session: dict[str, Any]) -> str:
    version = session.get("version")
    return f"Claude Code {version}" if isinstance(version, str) else "Claude Code"


def _shared(branch: list[dict[str, Any]], main: list[dict[str, Any]]) -> int:
    shared = 0
    for mine, theirs in zip(branch, main, strict=False):
        if mine != theirs:
            break
        shared += 1
    return shared


def _link_children(children: list[ParsedSession], messages: list[dict[str, Any]]) -> None:
    """Name the tool call that started each subagent, where a tool result says so."""
    started: dict[str, str] = {}
    for message in messages:
        for line in message.get("claude_code", ()):
            result = line.get("toolUseResult")
            if (
                message["role"] == "tool"
                and isinstance(result, dict)
                and isinstance(result.get("agentId"), str)
            ):
                started[result["agentId"]] = message["tool_call_id"]
    for child in children:
        agent = child.extra.get("claude_code", {}).get("agentId")
        if agent in started:
            child.extra["parent_tool_call_id"] = started[agent]
        elif isinstance(agent, str) and agent.startswith("acompact"):
            child.extra["purpose"] = "compaction"
