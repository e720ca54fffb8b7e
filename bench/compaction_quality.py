"""What a compacting memory still knows at the end of a long conversation.

    .venv/bin/python bench/compaction_quality.py [--thresholds 2000,4000,8000]
        [--locomo PATH] [--tau-budgets 300,500,1000,1500] [--tau-threshold 3000]
        [--limit N] [--skip-locomo] [--skip-ids] [--skip-tau] [--skip-example]
        [--skip-clearing] [--swe-threshold 2000] [--clear-keep 3] [--skip-lost]

Every figure is measured end to end, on the final context (``get_context()``,
the summary included), against dropping the oldest messages at the same
threshold (the newest messages whose context fits it).

LoCoMo (conversations 1-5), as the conversation appears: each turn becomes
one message ``"Speaker: text"``, a shared photo inline as ``[shares a photo:
<caption>]``, the session's date and time as a ``[stamp]`` opening its first
turn; speaker A's turns are user messages, B's assistant ones. They are
streamed one by one through ``CompactionMemory(token_threshold=T)`` with the
offline summariser. Printed for each threshold:

* answers kept: a QA item (categories 1-4) counts when its normalised answer
  (lower case, punctuation and the articles a/an/the removed, whitespace
  collapsed) occurs in the normalised final context; overall and per speaker,
  a QA item belonging to the speaker of its evidence turns (``"D1:3"`` is a
  ``dia_id``; an item whose evidence names both speakers counts in "both");
* the share of the summary's quoted text from each speaker (tokens);
* quoted lines are the summary's own; the lines the memory appends after a
  blank line (a ledger) are counted apart, as they carry no date or speaker;
* attribution: the share of quoted lines whose speaker is the one who said
  every sentence on it (the turns' own "Speaker:");
* dates: the share of the summary's quoted lines shown under the right date,
  the session stamp in force at the line (the layout shows it where it changes
  within a section), equal to the session date and time of every turn quoted
  on the line (or to its date part); a line with no date in force is wrong;
* filler: the share of the summary's quoted sentences without a content word
  (``FUNCTION_WORDS`` and ``PHATIC_WORDS`` below, this script's own lists, not
  the summariser's); and the share of the summary's tokens spent on filler:
  those sentences, plus appended lines that carry nothing (a quoted sentence
  without a content word, a value under a label of such words: ``great:
  Gatsby``, ``only: $10``);
* the mean and max time of a compaction.

Identifiers the user asked to keep: a scripted chat in which the user names
16 identifiers and says "Please remember that", then plain questions and
long answers, through ``CompactionMemory`` at 1,500 tokens: how many of the
16 are in the context after each of the first 5 compactions, with the
offline compactor and with a model compactor (``memory.testing.
scripted_server``) whose scripted summary keeps only some of them.

tau-bench airline (the runs in ``demo_data/``), two ways. Folded once: each
run (system prompt aside) folded up to its last unit (the last user message
and what follows) by ``offline_summary`` into a budget, or cut to the newest
messages that fit. Streamed: each run through ``CompactionMemory`` at
``--tau-threshold`` tokens; after every compaction, of the ids the task's
expected actions name (user and reservation ids, flight numbers, payment ids)
that the run had shown by then, the share still in the context.

Clearing old tool results first (``bench_tool_clearing``): the tau-bench runs
and the SWE-agent demonstration (``demo_data/``) streamed through
``CompactionMemory`` (offline summariser) with ``clear_tool_results`` off and
on (the newest ``--clear-keep`` results kept whole): the compactions (summaries
written) and clearings made, and the identifiers kept: after every step that
shrank the context (a compaction or a clearing), of the ids the run had shown
by then, the share still in the context, and the same in the final context.
tau-bench's ids are those of the task's expected actions (as above); the
SWE-agent run's are the string arguments of its tool calls that hold no space
(file paths, names it searched for), the things the agent acted on.

Then one real before/after pair: the first compaction of a tau-bench run.

LoCoMo is CC BY-NC: it is read from ``shared/data/locomo/`` beside the
checkout (the first such folder up the tree: a worktree's too), from
``$MOTUS_LOCOMO`` or from ``--locomo``. Never copy it into the repository.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import string
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sentencex import segment

from memory import (
    ChatMessage,
    CompactionMemory,
    CompactionMemoryConfig,
    OpenAIChatClient,
    TokenCounter,
    offline_summary,
)
from memory.testing.scripted_server import ScriptedReply, ScriptedServer
from memory.testing.support_chat import (
    SUPPORT_IDENTIFIERS,
    fragments_in,
    named_in,
    support_chat,
)

REPO = Path(__file__).resolve().parent.parent
LOCOMO_FILE = Path("shared") / "data" / "locomo" / "locomo10-part1.json"
TAU = REPO / "demo_data" / "tau-bench" / "gpt-4o-airline.json"
SWE = REPO / "demo_data" / "swe-agent" / "marshmallow-code__marshmallow-1867.traj"
QA_CATEGORIES = frozenset({1, 2, 3, 4})
_PUNCTUATION = str.maketrans("", "", string.punctuation + "\u2018\u2019\u201c\u201d")
_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
_DIA_ID = re.compile(r"D(\d+):(\d+)")
_LINE = re.compile(r"- (?:\[([^\[\]]{1,64})\] )?([^:\n]{1,160}?): (.*)")
_WORD = re.compile(r"[A-Za-z\u00c0-\u024f']+|\d+")

# The filler check's own vocabulary: words that carry no content in a chat line.
_FUNCTION_WORDS = """a about after again all also am an and any are as at back be because been
    but by can could did do does doing done for from get got had has have having he
    her here him his how i if in into is it its it's i'm i've i'll i'd just me my no
    not now of off oh on or our out so some than that that's the their them then there
    they this those to too up us very was we we're we'll were what when where which who
    will with would you your you're you'll you've yours yourself ya u ur"""
_PHATIC_WORDS = """hi hey hello hiya howdy yo morning evening afternoon night bye goodbye cya
    later soon see talk chat catch care take thanks thank thx ty appreciate appreciated
    welcome cheers congrats congratulations awesome amazing great good nice cool wow
    glad happy fun enjoy enjoyed enjoying lovely wonderful fantastic sweet sure okay ok
    yeah yep yes totally absolutely definitely agreed agree right true indeed haha lol
    bon appetit luck wish wishes best well soon again too same especially really so
    much lot lots sounds sound like love loved keep going way hang there buddy pal
    dear friend mate stay safe soon next time chatting catching up"""
FUNCTION_WORDS = frozenset(_FUNCTION_WORDS.split())
PHATIC_WORDS = frozenset(_PHATIC_WORDS.split())


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


async def stream(
    messages: Sequence[ChatMessage],
    threshold: int,
    on_compact: Callable[[CompactionMemory, dict[str, Any]], None] | None = None,
    **kwargs: Any,
) -> CompactionMemory:
    """``messages`` added one by one to a fresh memory at ``threshold`` tokens;
    ``on_compact(memory, stats)`` hears each compaction, the context already
    changed."""
    holder: list[CompactionMemory] = []

    def heard(stats: dict[str, Any]) -> None:
        if on_compact is not None:
            on_compact(holder[0], stats)

    memory = CompactionMemory(
        config=CompactionMemoryConfig(token_threshold=threshold), on_compact=heard, **kwargs
    )
    holder.append(memory)
    for message in messages:
        await memory.add_message(message)
    return memory


def percent(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "n/a"


def ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}x" if theirs else "inf"


def table(head: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """A markdown table, as bench/README.md shows it."""
    print("| " + " | ".join(head) + " |")
    print("| " + " | ".join("---:" for _ in head) + " |")
    for row in rows:
        print("| " + " | ".join(str(cell) for cell in row) + " |")


# --- LoCoMo --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Turn:
    speaker: str  # "A" or "B"
    date: str  # the session's date and time, as LoCoMo writes it
    text: str  # as the message shows it: "Name: text [shares a photo: ...]"


@dataclass(slots=True)
class Conversation:
    messages: list[ChatMessage]
    turns: list[Turn]
    answers: list[tuple[str, str | None]]  # (normalised answer, "A" / "B" / "both" / None)


def locomo_path(option: str | None) -> Path | None:
    if option:
        return Path(option)
    if os.environ.get("MOTUS_LOCOMO"):
        return Path(os.environ["MOTUS_LOCOMO"])
    for folder in REPO.parents:
        if (folder / LOCOMO_FILE).exists():
            return folder / LOCOMO_FILE
    return None


def locomo_conversation(sample: dict[str, Any]) -> Conversation:
    conv = sample["conversation"]
    numbers = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k))
    messages: list[ChatMessage] = []
    turns: list[Turn] = []
    speaker_of: dict[str, str] = {}
    for n in numbers:
        date = conv.get(f"session_{n}_date_time", "")
        for i, turn in enumerate(conv[f"session_{n}"]):
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares a photo: {turn['blip_caption']}]"
            side = "A" if turn["speaker"] == conv["speaker_a"] else "B"
            speaker_of[turn["dia_id"]] = side
            turns.append(Turn(side, date, text))
            shown = f"[{date}] {text}" if i == 0 and date else text
            messages.append(
                ChatMessage.user(shown) if side == "A" else ChatMessage.assistant(shown)
            )
    answers: list[tuple[str, str | None]] = []
    for qa in sample["qa"]:
        if qa.get("category") not in QA_CATEGORIES or "answer" not in qa:
            continue
        sides = {
            speaker_of.get(f"D{d}:{t}")
            for evidence in qa.get("evidence", [])
            for d, t in _DIA_ID.findall(evidence)
        } - {None}
        owner = next(iter(sides)) if len(sides) == 1 else ("both" if sides else None)
        answers.append((normalise(str(qa["answer"])), owner))
    return Conversation(messages, turns, answers)


def kept(answers: Sequence[tuple[str, str | None]], context: str) -> dict[str, int]:
    """How many answers occur in ``context``: ``"all"`` and per side."""
    text = normalise(context)
    counts = {"all": 0, "A": 0, "B": 0, "both": 0}
    for answer, side in answers:
        if answer in text:
            counts["all"] += 1
            if side is not None:
                counts[side] += 1
    return counts


def answer_totals(answers: Sequence[tuple[str, str | None]]) -> dict[str, int]:
    totals = {"all": len(answers), "A": 0, "B": 0, "both": 0}
    for _, side in answers:
        if side is not None:
            totals[side] += 1
    return totals


@dataclass(slots=True)
class SummaryReading:
    """What the quoted lines of a summary say, checked against the turns."""

    lines: int = 0
    dated_right: int = 0
    attributed_right: int = 0
    appended: int = 0  # lines after the summary's text (a ledger the memory adds)
    sentences: int = 0
    filler: int = 0
    filler_examples: list[str] = field(default_factory=list)
    tokens: dict[str, int] = field(default_factory=lambda: {"A": 0, "B": 0, "?": 0})
    filler_tokens: int = 0  # filler sentences quoted and filler lines appended
    summary_tokens: int = 0

    def add(self, other: SummaryReading) -> None:
        self.lines += other.lines
        self.dated_right += other.dated_right
        self.attributed_right += other.attributed_right
        self.appended += other.appended
        self.sentences += other.sentences
        self.filler += other.filler
        self.filler_tokens += other.filler_tokens
        self.summary_tokens += other.summary_tokens
        self.filler_examples.extend(other.filler_examples[: 3 - len(self.filler_examples)])
        for side, n in other.tokens.items():
            self.tokens[side] += n


def is_filler(sentence: str) -> bool:
    """No content word: every word is a function word or a phatic one."""
    words = [w.lower().strip("'") for w in _WORD.findall(sentence)]
    return not any(
        w and (w.isdigit() or (w not in FUNCTION_WORDS and w not in PHATIC_WORDS)) for w in words
    )


def is_filler_line(line: str) -> bool:
    """An appended (ledger) line that carries nothing: a quoted sentence
    without a content word ("Keep up the good work!"), or a value under a
    label that is no noun ("great: Gatsby", "only: $10")."""
    text = line.removeprefix("- ")
    if text.startswith('"'):
        return is_filler(text)
    label, colon, _ = text.partition(": ")
    return bool(colon) and is_filler(label)


def read_summary(summary: str, turns: Sequence[Turn], counter: TokenCounter) -> SummaryReading:
    """Each quoted line's date, its sentences' filler, its text's speaker."""
    reading = SummaryReading()
    texts = [" ".join(turn.text.split()) for turn in turns]
    shown: str | None = None
    # The summary's own layout has no blank line: what follows one was added
    # by the memory (its ledger of identifiers), not quoted by the summariser.
    quoted, _, appended = summary.partition("\n\n")
    reading.appended = sum(line.startswith("- ") for line in appended.splitlines())
    reading.summary_tokens = counter.count(summary)
    reading.filler_tokens = sum(
        counter.count(line)
        for line in appended.splitlines()
        if line.startswith("- ") and is_filler_line(line)
    )
    for line in quoted.splitlines()[1:]:
        found = _LINE.fullmatch(line)
        if found is None:
            shown = None  # a section title: the layout shows the date again below it
            continue
        shown = found.group(1) or shown
        runs = [run.strip() for run in found.group(3).split(" ... ")]
        runs = [run.removeprefix("... ").removesuffix(" ...") for run in runs]
        right = attributed = True
        for run in runs:
            if not run or run == "...":
                continue
            sources = [turns[i] for i, text in enumerate(texts) if " ".join(run.split()) in text]
            sides = {turn.speaker for turn in sources}
            side = sides.pop() if len(sides) == 1 else "?"
            reading.tokens[side] += counter.count(run)
            dates = {turn.date for turn in sources}
            right = right and shown is not None and any(_same_date(shown, d) for d in dates)
            speaker = found.group(2)
            attributed = attributed and any(t.text.startswith(f"{speaker}: ") for t in sources)
            for sentence in (s.strip() for s in segment("en", run)):
                if sentence:
                    reading.sentences += 1
                    if is_filler(sentence):
                        reading.filler += 1
                        reading.filler_tokens += counter.count(sentence)
                        reading.filler_examples.append(sentence)
        reading.lines += 1
        reading.dated_right += right
        reading.attributed_right += attributed
    return reading


def _same_date(shown: str, session: str) -> bool:
    return shown == session or shown == session.rsplit(" on ", 1)[-1]


def bench_locomo(
    path: Path, thresholds: list[int], limit: int | None, counter: TokenCounter
) -> None:
    samples = json.loads(path.read_text())[:limit]
    conversations = [locomo_conversation(sample) for sample in samples]
    totals = {"all": 0, "A": 0, "B": 0, "both": 0}
    whole = dict.fromkeys(totals, 0)
    ours = {t: dict.fromkeys(totals, 0) for t in thresholds}
    theirs = {t: dict.fromkeys(totals, 0) for t in thresholds}
    readings = {t: SummaryReading() for t in thresholds}
    durations: list[float] = []
    folded: list[int] = []
    for conversation in conversations:
        for side, n in answer_totals(conversation.answers).items():
            totals[side] += n
        for side, n in kept(conversation.answers, context_text(conversation.messages)).items():
            whole[side] += n
        for threshold in thresholds:
            summaries: list[str] = []

            def heard(
                _: CompactionMemory, stats: dict[str, Any], summaries: list[str] = summaries
            ) -> None:
                durations.append(stats["duration_s"])
                folded.append(stats["messages_compacted"])
                summaries.append(stats["summary"])

            memory = asyncio.run(stream(conversation.messages, threshold, heard))
            context = context_text(memory.get_context())
            for side, n in kept(conversation.answers, context).items():
                ours[threshold][side] += n
            budget = threshold - 3  # the reply priming the context count includes
            newest = context_text(newest_that_fit(conversation.messages, budget, counter))
            for side, n in kept(conversation.answers, newest).items():
                theirs[threshold][side] += n
            if summaries:
                readings[threshold].add(read_summary(summaries[-1], conversation.turns, counter))

    print(
        f"LoCoMo: {len(samples)} conversations streamed through CompactionMemory, "
        f"{totals['all']} QA items (categories 1-4): speaker A {totals['A']}, "
        f"speaker B {totals['B']}, both {totals['both']}"
    )
    print(
        "whole conversation (the ceiling): "
        + ", ".join(f"{side} {whole[side] / totals[side]:.3f}" for side in ("all", "A", "B"))
    )
    print("\nAnswers kept (offline summary / drop-oldest, ratio):")
    rows = []
    for t in thresholds:
        row: list[object] = [f"{t:,}"]
        for side in ("all", "A", "B", "both"):
            a, b = ours[t][side] / totals[side], theirs[t][side] / totals[side]
            row.append(f"{a:.3f} / {b:.3f} ({ratio(a, b)})")
        rows.append(row)
    table(["threshold", "all", "speaker A", "speaker B", "both"], rows)
    print("\nThe final summary of each conversation, read line by line:")
    rows = []
    for t in thresholds:
        r = readings[t]
        spoken = r.tokens["A"] + r.tokens["B"]
        rows.append(
            [
                f"{t:,}",
                f"{percent(r.tokens['A'], spoken)} / {percent(r.tokens['B'], spoken)}",
                f"{percent(r.dated_right, r.lines)} ({r.dated_right}/{r.lines})",
                f"{percent(r.attributed_right, r.lines)}",
                f"{r.appended}",
                f"{percent(r.filler, r.sentences)} ({r.filler}/{r.sentences})",
                f"{percent(r.filler_tokens, r.summary_tokens)}",
            ]
        )
    table(
        [
            "threshold",
            "text from A / B",
            "lines under the right date",
            "lines naming who said it",
            "lines appended after it",
            "filler",
            "filler tokens (quoted and appended) / summary tokens",
        ],
        rows,
    )
    examples = [e for t in thresholds for e in readings[t].filler_examples][:6]
    if examples:
        print("filler quoted: " + " | ".join(examples))
    n = max(1, len(durations))
    print(
        f"\noffline compaction: {1000 * sum(durations) / n:.1f} ms mean, "
        f"{1000 * max(durations, default=0):.1f} ms max over {len(durations)} compactions "
        f"(mean {sum(folded) / n:.0f} messages folded, plus the previous summary)\n"
    )


# --- Identifiers the user asked to keep -----------------------------------------------------

IDENTIFIERS = (
    ("booking reference", "QX7T2M"),
    ("hotel confirmation code", "HTL-88231"),
    ("outbound flight", "BA0287"),
    ("return flight", "LH2473"),
    ("passport number", "533380216"),
    ("frequent flyer number", "FF-4418-2290"),
    ("seat", "14C"),
    ("rental car reservation", "HZ-77104-Q"),
    ("travel insurance policy", "TIP-2024-55817"),
    ("visa application", "VA9937215"),
    ("train ticket", "TGV-6619-A"),
    ("restaurant booking", "RB-3307"),
    ("museum ticket", "MUS-20481"),
    ("conference badge", "CONF-8812"),
    ("emergency contact phone", "+44 7700 900461"),
    ("e-mail", "dana.kowalski@example.org"),
)
TOPICS = (
    "the old town of Lisbon",
    "tram 28 and its route",
    "pastries in Belem",
    "the fado houses of Alfama",
    "day trips to Sintra",
    "the beaches of Cascais",
    "the Gulbenkian museum",
    "the LX Factory market",
    "the viewpoints over the river",
    "the food hall at Cais do Sodre",
    "walking the Avenida da Liberdade",
    "the oceanarium in Parque das Nacoes",
)


def identifier_chat(rounds: int) -> list[ChatMessage]:
    """The user's 16 identifiers, one a line, then ``rounds`` questions whose
    long answers carry codes, times and prices of their own."""
    listing = "\n".join(f"- {what}: {value}" for what, value in IDENTIFIERS)
    messages = [
        ChatMessage.user(f"I'm planning my trip to Lisbon. Here are my details:\n{listing}"),
        ChatMessage.user("Please remember that."),
        ChatMessage.assistant("Noted: I will keep all sixteen of those details."),
    ]
    for n in range(rounds):
        topic = TOPICS[n % len(TOPICS)]
        messages.append(ChatMessage.user(f"What should I know about {topic}?"))
        answer = " ".join(
            f"Tip {k + 1} for {topic}: stop LX{n:02d}{k:02d} is served by line {20 + k}E "
            f"from 07:{(5 * k + n) % 60:02d}, a ticket costs EUR {2 + (n + k) % 5}.{k}0 and "
            f"the walk takes {5 + (n * 7 + k * 3) % 20} minutes."
            for k in range(8)
        )
        messages.append(ChatMessage.assistant(answer))
    return messages


async def identifiers_kept(
    messages: Sequence[ChatMessage], threshold: int, compactions: int, **kwargs: Any
) -> tuple[list[int], list[str]]:
    """How many of the 16 identifiers the context holds after each compaction,
    and the ones missing after the last."""
    counts: list[int] = []
    missing: list[str] = []

    def heard(memory: CompactionMemory, _: dict[str, Any]) -> None:
        context = context_text(memory.get_context())
        counts.append(sum(value in context for _, value in IDENTIFIERS))
        missing[:] = [value for _, value in IDENTIFIERS if value not in context]

    holder: list[CompactionMemory] = []
    memory = CompactionMemory(
        config=CompactionMemoryConfig(token_threshold=threshold),
        on_compact=lambda stats: heard(holder[0], stats),
        **kwargs,
    )
    holder.append(memory)
    for message in messages:
        await memory.add_message(message)
        if len(counts) >= compactions:
            break
    return counts, missing


def bench_identifiers(threshold: int = 1500, compactions: int = 5) -> None:
    messages = identifier_chat(rounds=40)
    offline, offline_missing = asyncio.run(identifiers_kept(messages, threshold, compactions))
    # The model keeps the first ten identifiers it was told and drops the last six.
    summary = "## User requests and constraints\nThe user is planning a trip to Lisbon: " + (
        " ".join(f"{what}: {value}." for what, value in IDENTIFIERS[:10])
    )
    with ScriptedServer(openai=[ScriptedReply(text=summary)] * (compactions + 2)) as server:
        client = OpenAIChatClient(server.openai_base_url, api_key="bench")
        model, model_missing = asyncio.run(
            identifiers_kept(messages, threshold, compactions, client=client, model_name="gpt-4o")
        )
    print(
        f"Identifiers the user asked to keep: 16 named in the first message, then questions "
        f"and long answers at a {threshold:,}-token threshold; of the 16, still in the context "
        "after each compaction:"
    )
    head = ["compactor"] + [f"after {n + 1}" for n in range(compactions)] + ["missing at the end"]
    table(
        head,
        [
            ["offline", *[f"{n}/16" for n in offline], ", ".join(offline_missing) or "none"],
            [
                "model (its summary keeps 10)",
                *[f"{n}/16" for n in model],
                ", ".join(model_missing) or "none",
            ],
        ],
    )
    print()


async def support_chat_kept(
    threshold: int, **kwargs: Any
) -> tuple[list[str], int, list[str], list[str]]:
    """``memory.testing.support_chat`` streamed through ``CompactionMemory``:
    after each compaction, how many of the user's identifiers said so far the
    context holds ("kept/said"), how many compactions ran, the ones missing at the
    end, and the lines showing a fragment of one as a value."""
    counts: list[str] = []
    holder: list[CompactionMemory] = []
    said: list[str] = []

    def heard(stats: dict[str, Any]) -> None:
        if stats.get("status") == "ok":
            kept = len(named_in(context_text(holder[0].get_context())))
            counts.append(f"{kept}/{len(named_in(' '.join(said)))}")

    memory = CompactionMemory(
        config=CompactionMemoryConfig(token_threshold=threshold), on_compact=heard, **kwargs
    )
    holder.append(memory)
    for message in support_chat():
        if message.role == "user":
            said.append(message.text)
        await memory.add_message(message)
    context = context_text(memory.get_context())
    missing = [value for _, value in SUPPORT_IDENTIFIERS if value not in named_in(context)]
    return counts, len(counts), missing, fragments_in(context)


def bench_support_chat(threshold: int = 2000) -> None:
    """Point 2 of issue 28: identifiers said in passing, amid decoys."""
    careless = "The user is following up on a broken dishwasher and a refund; the agent checks."
    offline = asyncio.run(support_chat_kept(threshold))
    with ScriptedServer(openai=[ScriptedReply(text=careless)] * 200) as server:

        async def with_model() -> tuple[list[str], int, list[str], list[str]]:
            async with OpenAIChatClient(server.openai_base_url, api_key="bench") as client:
                return await support_chat_kept(threshold, client=client, model_name="gpt-4o")

        model = asyncio.run(with_model())
    print(
        "Identifiers said in passing: a 60-turn support chat (memory.testing.support_chat), "
        f"16 identifiers in varied forms amid tool results of decoys, at {threshold:,} tokens; "
        "in the context after each of the first 5 compactions (of those said by then) "
        "and at the end:"
    )
    rows = []
    for name, (counts, total, missing, fragments) in (
        ("offline", offline),
        ("model (a careless summary naming none)", model),
    ):
        rows.append(
            [
                name,
                *counts[:5],
                f"{16 - len(missing)}/16 after {total} compactions",
                ", ".join(missing) or "none",
                str(len(fragments)),
            ]
        )
    head = ["compactor", *[f"after {n + 1}" for n in range(5)], "at the end", "missing"]
    table([*head, "fragments shown as values"], rows)
    print()


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


def tau_runs(limit: int | None) -> list[tuple[list[ChatMessage], list[str]]]:
    """Each run's messages (system prompt aside) and the ids its task acts on
    that the run shows at all."""
    out = []
    for run in json.loads(TAU.read_text())[:limit]:
        messages = [ChatMessage.from_dict(m) for m in run["traj"] if m["role"] != "system"]
        everything = context_text(messages)
        ids = sorted({i for a in run["info"]["task"]["actions"] for i in action_ids(a)})
        out.append((messages, [i for i in ids if i in everything]))
    return out


def bench_tau(budgets: list[int], limit: int | None, counter: TokenCounter) -> None:
    runs = tau_runs(limit)
    rows = []
    clock: list[float] = []
    for budget in budgets:
        kept_ids = [0, 0]
        complete = [0, 0]
        named = runs_counted = 0
        for messages, ids in runs:
            if not ids:
                continue
            last_user = max(i for i, m in enumerate(messages) if m.role == "user")
            folded, tail = messages[:last_user], messages[last_user:]
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
        rows.append(
            [
                f"{budget:,}",
                percent(kept_ids[0], named),
                percent(kept_ids[1], named),
                percent(complete[0], runs_counted),
                percent(complete[1], runs_counted),
            ]
        )
    print(
        f"tau-bench airline: {len(runs)} runs folded once up to their last unit "
        f"({named} ids in {runs_counted} runs)"
    )
    table(
        [
            "budget",
            "ids kept: offline",
            "drop-oldest",
            "runs keeping every id: offline",
            "drop-oldest",
        ],
        rows,
    )
    ms = 1000 * sum(clock) / max(1, len(clock))
    print(f"offline_summary: {ms:.1f} ms per call (max {1000 * max(clock, default=0):.1f} ms)\n")


def ids_after_each_compaction(
    messages: Sequence[ChatMessage], ids: Sequence[str], threshold: int
) -> tuple[list[tuple[int, int]], list[float], list[str]]:
    """For each compaction of ``messages`` streamed at ``threshold``: how many
    of ``ids`` the run had shown by then, and how many of those the context
    holds; the compactions' durations; the ids found missing."""
    checks: list[tuple[int, int]] = []
    durations: list[float] = []
    missing: list[str] = []

    def heard(memory: CompactionMemory, stats: dict[str, Any]) -> None:
        durations.append(stats["duration_s"])
        shown = context_text(messages[: stats["through_seq"] + 1])
        context = context_text(memory.get_context())
        named = [i for i in ids if i in shown]
        missing.extend(i for i in named if i not in context)
        checks.append((len(named), sum(i in context for i in named)))

    asyncio.run(stream(messages, threshold, heard))
    return checks, durations, missing


def bench_tau_stream(threshold: int, limit: int | None) -> None:
    checked = held = compactions = runs_with = runs_whole = 0
    durations: list[float] = []
    lost: dict[str, int] = {}
    for messages, ids in tau_runs(limit):
        if not ids:
            continue
        checks, times, missing = ids_after_each_compaction(messages, ids, threshold)
        compactions += len(checks)
        durations.extend(times)
        for i in missing:
            lost[i] = lost.get(i, 0) + 1
        run_checked = sum(n for n, _ in checks)
        run_held = sum(k for _, k in checks)
        if run_checked:
            runs_with += 1
            runs_whole += run_checked == run_held
        checked += run_checked
        held += run_held
    n = max(1, len(durations))
    print(
        f"tau-bench airline streamed through CompactionMemory at {threshold:,} tokens: "
        f"{compactions} compactions in {runs_with} runs; ids (of the task's actions, shown "
        f"by then) in the context after each compaction: {percent(held, checked)} "
        f"({held}/{checked}); runs keeping every id after every compaction: "
        f"{percent(runs_whole, runs_with)}"
    )
    if lost:
        worst = sorted(lost.items(), key=lambda kv: -kv[1])[:6]
        print("most often missing: " + ", ".join(f"{i} ({k}x)" for i, k in worst))
    print(
        f"offline compaction: {1000 * sum(durations) / n:.1f} ms mean, "
        f"{1000 * max(durations, default=0):.1f} ms max\n"
    )


# --- clearing old tool results before summarising -----------------------------------------


@dataclass
class ClearingTally:
    """Figures of one policy over a set of runs."""

    compactions: int = 0
    clearings: int = 0
    checked: int = 0  # ids shown by a shrink, summed over the shrinks
    held: int = 0
    final_checked: int = 0
    final_held: int = 0
    tokens_final: int = 0


async def stream_with_checks(
    messages: Sequence[ChatMessage], ids: Sequence[str], config: CompactionMemoryConfig
) -> ClearingTally:
    """``messages`` through a memory with ``config``; after each message that
    made a compaction or a clearing, how many of ``ids`` shown so far the
    context holds; the same at the end."""
    memory = CompactionMemory(config=config)
    tally = ClearingTally()
    shown_text = ""
    for message in messages:
        before = (memory.compaction_count, memory._state.clearing_number)
        await memory.add_message(message)
        shown_text += "\n" + context_text([message])
        after = (memory.compaction_count, memory._state.clearing_number)
        if after == before:
            continue
        tally.compactions += after[0] - before[0]
        tally.clearings += after[1] - before[1]
        context = context_text(memory.get_context())
        named = [i for i in ids if i in shown_text]
        tally.checked += len(named)
        tally.held += sum(i in context for i in named)
    context = context_text(memory.get_context())
    named = [i for i in ids if i in shown_text]
    tally.final_checked, tally.final_held = len(named), sum(i in context for i in named)
    tally.tokens_final = memory.estimate_context_tokens()
    return tally


def swe_run() -> tuple[list[ChatMessage], list[str]]:
    """The SWE-agent demonstration's messages (system prompt aside) and its ids."""
    history = json.loads(SWE.read_text())["history"]
    messages = [ChatMessage.from_dict(m) for m in history if m["role"] != "system"]
    ids: set[str] = set()
    for m in messages:
        for call in m.tool_calls:
            try:
                arguments = json.loads(call.arguments or "{}")
            except json.JSONDecodeError:
                continue
            values = arguments.values() if isinstance(arguments, dict) else []
            ids.update(v for v in values if isinstance(v, str) and len(v) >= 3 and " " not in v)
    shown = context_text(messages)
    return messages, sorted(i for i in ids if i in shown)


def bench_tool_clearing(
    tau_threshold: int, swe_threshold: int, keep: int, limit: int | None
) -> None:
    sets = {
        f"tau-bench airline at {tau_threshold:,} tokens": (
            [(m, i) for m, i in tau_runs(limit) if i],
            tau_threshold,
        ),
        f"SWE-agent marshmallow-1867 at {swe_threshold:,} tokens": ([swe_run()], swe_threshold),
    }
    rows = []
    for name, (runs, threshold) in sets.items():
        for clear in (False, True):
            config = CompactionMemoryConfig(
                token_threshold=threshold,
                compact_model_name="offline",
                clear_tool_results=clear,
                clear_keep_tool_results=keep,
            )
            total = ClearingTally()
            for messages, ids in runs:
                tally = asyncio.run(stream_with_checks(messages, ids, config))
                for key in vars(total):
                    setattr(total, key, getattr(total, key) + getattr(tally, key))
            rows.append(
                [
                    name if not clear else "",
                    f"clear, keep {keep}" if clear else "summarise only",
                    f"{total.compactions:,}",
                    f"{total.clearings:,}",
                    f"{percent(total.held, total.checked)} ({total.held}/{total.checked})",
                    f"{percent(total.final_held, total.final_checked)} "
                    f"({total.final_held}/{total.final_checked})",
                    f"{total.tokens_final // max(1, len(runs)):,}",
                ]
            )
    print(
        "Clearing old tool results before summarising (offline summariser): "
        "summaries written, clearings, ids in the context after each shrink and at the end"
    )
    table(
        [
            "runs",
            "policy",
            "compactions",
            "clearings",
            "ids kept after each shrink",
            "ids in the final context",
            "final context tokens (mean)",
        ],
        rows,
    )
    print()


def before_after(run_index: int, threshold: int, shown: int = 8) -> None:
    """The first compaction of a tau-bench run streamed through a memory."""
    run = json.loads(TAU.read_text())[run_index]
    messages = [ChatMessage.from_dict(m) for m in run["traj"] if m["role"] != "system"]
    compactions: list[dict[str, Any]] = []
    asyncio.run(stream(messages, threshold, lambda _, stats: compactions.append(stats)))
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


LOST_LIST_LABELS = REPO / "tests/memory/fixtures/lost_list_labelled.json"


def bench_lost_list(path: Path = LOST_LIST_LABELS) -> None:
    """The lost-list's precision and recall on the labelled set of real
    messages (tau-bench, Claude Code, Codex): which of a message's
    identifiers the compaction page checks, against a person's labels."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "motus_web.settings")
    import django

    django.setup()
    from motus_web.dashboard import lost

    items = json.loads(path.read_text())
    scores = lost.labelled_scores(items)
    labelled = sum(len(item["identifiers"]) for item in items)
    print(f"Lost-list on {labelled} labelled identifiers from {len(items)} real messages")
    table(
        ["precision", "recall", "false positives", "misses"],
        [
            [
                f"{scores.precision:.3f}",
                f"{scores.recall:.3f}",
                ", ".join(sorted(set(scores.false_positives))),
                ", ".join(sorted(set(scores.misses))),
            ]
        ],
    )
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--thresholds", default="2000,4000,8000", help="LoCoMo, in tokens")
    parser.add_argument("--locomo", default=None, help="path of locomo10-part1.json")
    parser.add_argument("--tau-budgets", default="300,500,1000,1500", help="in tokens")
    parser.add_argument("--tau-threshold", type=int, default=3000, help="in tokens")
    parser.add_argument("--limit", type=int, default=None, help="conversations / runs to use")
    parser.add_argument("--skip-locomo", action="store_true", help="no LoCoMo check")
    parser.add_argument("--skip-ids", action="store_true", help="no identifier chat")
    parser.add_argument("--skip-tau", action="store_true", help="no tau-bench checks")
    parser.add_argument("--skip-example", action="store_true", help="no before/after pair")
    parser.add_argument("--skip-clearing", action="store_true", help="no tool-result clearing")
    parser.add_argument("--swe-threshold", type=int, default=2000, help="in tokens")
    parser.add_argument("--clear-keep", type=int, default=3, help="tool results kept whole")
    parser.add_argument("--skip-lost", action="store_true", help="no lost-list labelled set")
    args = parser.parse_args()
    counter = TokenCounter.for_model(None)

    def ints(text: str) -> list[int]:
        return [int(x) for x in text.split(",") if x.strip()]

    if not args.skip_locomo:
        path = locomo_path(args.locomo)
        if path is None or not path.exists():
            print(f"skipped LoCoMo: {path or LOCOMO_FILE} not found\n")
        elif ints(args.thresholds):
            bench_locomo(path, ints(args.thresholds), args.limit, counter)
    if not args.skip_ids:
        bench_identifiers()
        bench_support_chat()
    if not args.skip_tau:
        bench_tau(ints(args.tau_budgets), args.limit, counter)
        bench_tau_stream(args.tau_threshold, args.limit)
    if not args.skip_clearing:
        bench_tool_clearing(args.tau_threshold, args.swe_threshold, args.clear_keep, args.limit)
    if not args.skip_example:
        before_after(0, 2000)
    if not args.skip_lost:
        bench_lost_list()


if __name__ == "__main__":
    main()
