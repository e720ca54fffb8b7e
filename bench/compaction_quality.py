"""What a compacting memory still knows at the end of a long conversation.

    .venv/bin/python bench/compaction_quality.py [--thresholds 2000,4000,8000]
        [--tau-budgets 300,500,1000,1500] [--limit N]

LoCoMo, end to end as a user meets it: each conversation becomes chat
messages (speaker A as user, B as assistant, the session date before the
first turn of each session) streamed one by one through
``CompactionMemory(token_threshold=T)`` with the offline summariser. At the
end, a QA item (categories 1-4) counts as kept when its normalised answer
(lower case, punctuation and the articles a/an/the removed, whitespace
collapsed) occurs in the normalised final context (``get_context()``, the
summary included). Compared with dropping the oldest turns at the same
threshold (the newest messages whose context fits T tokens) and with the
whole conversation (the ceiling).

tau-bench: each airline run (system prompt aside) is folded up to its last
unit (the last user message and what follows) by ``offline_summary`` into
``budget`` tokens, or by keeping the newest messages that fit; we count the ids
named in the task's expected actions (user ids, reservation ids, flight
numbers, payment ids) that are still in the context, among those that appear
in the run at all.

Then one real before/after pair: the first compaction of a tau-bench run
streamed through a memory, the messages it folded (the first few) and the
summary it wrote.

LoCoMo is CC BY-NC and is read from ../shared/data beside the checkout: never
copy it into the repository. The tau-bench runs ship in demo_data/.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import string
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory import (
    ChatMessage,
    CompactionMemory,
    CompactionMemoryConfig,
    TokenCounter,
    offline_summary,
)

REPO = Path(__file__).resolve().parent.parent
LOCOMO = REPO.parent / "shared" / "data" / "locomo" / "locomo10-part1.json"
TAU = REPO / "demo_data" / "tau-bench" / "gpt-4o-airline.json"
QA_CATEGORIES = frozenset({1, 2, 3, 4})
_PUNCTUATION = str.maketrans("", "", string.punctuation + "\u2018\u2019\u201c\u201d")
_ARTICLES = re.compile(r"\b(?:a|an|the)\b")


def normalise(text: str) -> str:
    """SQuAD-style answer normalisation: lower case, no punctuation or articles."""
    text = text.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def context_text(messages: Sequence[ChatMessage]) -> str:
    parts = []
    for m in messages:
        parts.append(m.text)
        parts.extend(f"{c.name}({c.arguments})" for c in m.tool_calls)
    return "\n".join(parts)


def newest_that_fit(
    messages: Sequence[ChatMessage], budget: int, counter: TokenCounter
) -> list[ChatMessage]:
    """Drop-oldest: the newest messages whose tokens fit ``budget``."""
    kept: list[ChatMessage] = []
    used = 0
    for message in reversed(messages):
        used += counter.message_tokens(message)
        if used > budget:
            break
        kept.append(message)
    return kept[::-1]


# --- LoCoMo --------------------------------------------------------------------------------


def locomo_messages(sample: dict[str, Any]) -> list[ChatMessage]:
    conv = sample["conversation"]
    numbers = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k))
    messages = []
    for n in numbers:
        date = conv.get(f"session_{n}_date_time", "")
        for i, turn in enumerate(conv[f"session_{n}"]):
            text = turn["text"] if i or not date else f"[{date}] {turn['text']}"
            is_a = turn["speaker"] == conv["speaker_a"]
            messages.append(ChatMessage.user(text) if is_a else ChatMessage.assistant(text))
    return messages


def qa_answers(sample: dict[str, Any]) -> list[str]:
    return [
        normalise(str(qa["answer"]))
        for qa in sample["qa"]
        if qa.get("category") in QA_CATEGORIES and "answer" in qa
    ]


async def stream(
    messages: Sequence[ChatMessage], threshold: int, compactions: list[dict[str, Any]]
) -> CompactionMemory:
    memory = CompactionMemory(
        config=CompactionMemoryConfig(token_threshold=threshold), on_compact=compactions.append
    )
    for message in messages:
        await memory.add_message(message)
    return memory


def kept(answers: Sequence[str], context: str) -> int:
    text = normalise(context)
    return sum(answer in text for answer in answers)


def bench_locomo(thresholds: list[int], limit: int | None, counter: TokenCounter) -> None:
    samples = json.loads(LOCOMO.read_text())[:limit]
    total = whole = 0
    rows = {t: [0, 0] for t in thresholds}  # offline, drop-oldest
    durations: list[float] = []
    folded_per_call: list[int] = []
    for sample in samples:
        messages = locomo_messages(sample)
        answers = qa_answers(sample)
        total += len(answers)
        whole += kept(answers, context_text(messages))
        for threshold in thresholds:
            compactions: list[dict[str, Any]] = []
            memory = asyncio.run(stream(messages, threshold, compactions))
            durations.extend(c["duration_s"] for c in compactions)
            folded_per_call.extend(c["messages_compacted"] for c in compactions)
            rows[threshold][0] += kept(answers, context_text(memory.get_context()))
            budget = threshold - 3  # the reply priming the context count includes
            rows[threshold][1] += kept(
                answers, context_text(newest_that_fit(messages, budget, counter))
            )

    print(
        f"LoCoMo: {len(samples)} conversations streamed through CompactionMemory, "
        f"{total} QA items (categories 1-4)"
    )
    print(f"whole conversation: {whole / total:.3f} of the answers (the ceiling)")
    print("threshold | answers kept: offline summary | drop-oldest | ratio")
    for threshold, (ours, theirs) in rows.items():
        ratio = ours / theirs if theirs else float("inf")
        print(f"{threshold:9d} | {ours / total:29.3f} | {theirs / total:11.3f} | {ratio:4.2f}x")
    n = max(1, len(durations))
    print(
        f"offline compaction: {1000 * sum(durations) / n:.1f} ms mean, "
        f"{1000 * max(durations, default=0):.1f} ms max over {len(durations)} compactions "
        f"(mean {sum(folded_per_call) / n:.0f} messages folded, plus the previous summary)\n"
    )


def before_after(run_index: int, threshold: int, shown: int = 8) -> None:
    """The first compaction of a tau-bench run streamed through a memory."""
    run = json.loads(TAU.read_text())[run_index]
    messages = [ChatMessage.from_dict(m) for m in run["traj"] if m["role"] != "system"]
    compactions: list[dict[str, Any]] = []
    asyncio.run(stream(messages, threshold, compactions))
    first = compactions[0]
    low, high = first["summarized_seqs"]
    replayed = set(first["replayed_seqs"])
    folded = [messages[s] for s in range(low, high + 1) if s not in replayed]
    print(
        f"Before/after: tau-bench run {run_index} streamed at a {threshold}-token threshold; "
        f"its first compaction folded {len(folded)} messages "
        f"({first['tokens_before']} -> {first['tokens_after']} context tokens). "
        f"The first {shown} (long ones cut here for display):"
    )
    for m in folded[:shown]:
        print("  " + _shown(m))
    print(f"The summary ({first['summary_tokens']} tokens in its continuation message):")
    print("\n".join("  " + line for line in first["summary"].splitlines()))
    print()


def _shown(message: ChatMessage, width: int = 160) -> str:
    text = " ".join(message.text.split())
    calls = " ".join(f"{c.name}({c.arguments})" for c in message.tool_calls)
    line = " ".join(part for part in (f"[{message.role}]", text, calls) if part)
    return line if len(line) <= width else line[:width] + f" [+{len(line) - width} chars]"


# --- tau-bench ---------------------------------------------------------------------------


def action_ids(value: Any, key: str = "") -> Iterator[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from action_ids(v, k)
    elif isinstance(value, list):
        for v in value:
            yield from action_ids(v, key)
    elif isinstance(value, str) and (key.endswith("_id") or key == "flight_number"):
        yield value


def bench_tau(budgets: list[int], limit: int | None, counter: TokenCounter) -> None:
    runs = json.loads(TAU.read_text())[:limit]
    lines = []
    clock: list[float] = []
    for budget in budgets:
        kept_ids = [0, 0]
        complete = [0, 0]
        named = runs_counted = 0
        for run in runs:
            messages = [ChatMessage.from_dict(m) for m in run["traj"] if m["role"] != "system"]
            last_user = max(i for i, m in enumerate(messages) if m.role == "user")
            folded, tail = messages[:last_user], messages[last_user:]
            everything = context_text(messages)
            ids = sorted({i for a in run["info"]["task"]["actions"] for i in action_ids(a)})
            ids = [i for i in ids if i in everything]
            if not ids:
                continue
            started = time.perf_counter()
            summary = offline_summary(folded, budget_tokens=budget, counter=counter)
            clock.append(time.perf_counter() - started)
            ours = summary + "\n" + context_text(tail)
            theirs = context_text(newest_that_fit(folded, budget, counter) + tail)
            n_ours = sum(i in ours for i in ids)
            n_theirs = sum(i in theirs for i in ids)
            named += len(ids)
            runs_counted += 1
            kept_ids[0] += n_ours
            kept_ids[1] += n_theirs
            complete[0] += n_ours == len(ids)
            complete[1] += n_theirs == len(ids)
        runs_counted = max(1, runs_counted)
        lines.append(
            f"{budget:6d} | {100 * kept_ids[0] / max(1, named):16.1f}% "
            f"{100 * kept_ids[1] / max(1, named):11.1f}% | "
            f"{100 * complete[0] / runs_counted:30.1f}% {100 * complete[1] / runs_counted:11.1f}%"
            f"   ({named} ids in {runs_counted} runs)"
        )
    print(f"tau-bench airline: {len(runs)} runs folded up to their last unit")
    print("budget | ids kept: offline  drop-oldest | runs keeping every id: offline  drop-oldest")
    print("\n".join(lines))
    ms = 1000 * sum(clock) / max(1, len(clock))
    print(f"offline_summary: {ms:.1f} ms per call (max {1000 * max(clock, default=0):.1f} ms)\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--thresholds", default="2000,4000,8000", help="LoCoMo, in tokens")
    parser.add_argument("--tau-budgets", default="300,500,1000,1500", help="in tokens")
    parser.add_argument("--limit", type=int, default=None, help="conversations / runs to use")
    parser.add_argument("--skip-tau", action="store_true", help="no tau-bench check")
    parser.add_argument("--skip-example", action="store_true", help="no before/after pair")
    args = parser.parse_args()
    counter = TokenCounter.for_model(None)

    def ints(text: str) -> list[int]:
        return [int(x) for x in text.split(",") if x.strip()]

    if not LOCOMO.exists():
        print(f"skipped LoCoMo: {LOCOMO} not found\n")
    elif ints(args.thresholds):
        bench_locomo(ints(args.thresholds), args.limit, counter)
    if not args.skip_tau:
        bench_tau(ints(args.tau_budgets), args.limit, counter)
    if not args.skip_example:
        before_after(0, 2000)


if __name__ == "__main__":
    main()
