"""Figures about a session kept up to date as its records are written, so
that its pages read a bounded number of rows whatever the session's length.

Two kinds, both written by ``log_store.DatabaseLogStore`` in the transaction
that writes the records they count (a crash leaves both or neither):

- ``Usage``: the provider's reported usage of every reply, summed per model
  (``Session.usage_totals``), for the session page's cost estimate; and the
  logged tokens per role and unit (``Session.part_totals``), for the
  context page of a long context that never compacted.
- ``ChartBlocks``: for runs of seqs of fixed widths (``BASE`` messages at
  level 0, twice as many at each level up to ``LEVELS - 1``), the highest and
  the lowest context size in the run, with their seqs (``ChartBlock`` rows).
  Messages count with their logged context size; a compaction with the size
  it started from and the size it left, at its ``through_seq``. The session
  page's chart reads one level, at most ``2 * buckets + 1`` rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db import connection

from .models import ChartBlock, Session

BASE = 4  # messages a level-0 block spans
LEVELS = 16  # the widest block spans BASE * 2**15 (131,072) messages: a chart of up
# to 65 million messages reads one level of at most 2 * chart_points.BUCKETS + 1 blocks


def width(level: int) -> int:
    """The seqs a block of ``level`` spans."""
    return BASE << level


# -- usage -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplyUsage:
    """A reply's reported usage; ``output`` is ``None`` when only the input was logged."""

    model: str
    input: int  # cached part included
    cached: int
    output: int | None

    @classmethod
    def of(
        cls, model: str, provider_tokens: int | None, extra: Mapping[str, Any]
    ) -> ReplyUsage | None:
        """The usage a message record carries: its ``usage`` (``input_tokens``,
        ``cached_input_tokens``, ``output_tokens``, ``model``) when the library
        logged it, else only ``provider_tokens`` (the input); ``None``
        without either. ``model`` is the session's, for a usage that names none."""
        usage = extra.get("usage")
        if isinstance(usage, Mapping) and _count(usage.get("input_tokens")) is not None:
            return cls(
                str(usage.get("model") or model),
                _count(usage.get("input_tokens")) or 0,
                _count(usage.get("cached_input_tokens")) or 0,
                _count(usage.get("output_tokens")),
            )
        if provider_tokens is None:
            return None
        return cls(model, provider_tokens, 0, None)


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def add_usage(totals: dict[str, list[int]], usage: ReplyUsage) -> None:
    """Count ``usage`` in ``totals``: ``{"<model>\\t<1 if output reported else 0>":
    [input, cached, output, replies]}``, the shape of ``Session.usage_totals``."""
    key = f"{usage.model}\t{int(usage.output is not None)}"
    sums = totals.setdefault(key, [0, 0, 0, 0])
    sums[0] += usage.input
    sums[1] += usage.cached
    sums[2] += usage.output or 0
    sums[3] += 1


def usage_sums(totals: Mapping[str, Any]) -> list[tuple[ReplyUsage, int]]:
    """``Session.usage_totals`` read back: each model's summed usage and its number of replies."""
    out = []
    for key, (input_tokens, cached, output, replies) in sorted(totals.items()):
        model, _, has_output = key.rpartition("\t")
        usage = ReplyUsage(model, input_tokens, cached, output if has_output == "1" else None)
        out.append((usage, replies))
    return out


# -- tokens by part -----------------------------------------------------------------------


def add_part(
    totals: dict[str, list[int]], role: str, unit: str, tokens: int, count: int = 1
) -> None:
    """Count ``count`` messages of ``tokens`` in ``totals``, the shape of
    ``Session.part_totals``: ``{"<role>\t<unit>": [tokens, messages]}``."""
    sums = totals.setdefault(f"{role}\t{unit}", [0, 0])
    sums[0] += tokens
    sums[1] += count


def part_sums(totals: dict[str, Any]) -> list[tuple[str, str, int, int]]:
    """``Session.part_totals`` read back: ``(role, unit, tokens, messages)`` each."""
    out = []
    for key, (tokens, count) in sorted(totals.items()):
        role, _, unit = key.partition("\t")
        out.append((role, unit, tokens, count))
    return out


# -- chart blocks ------------------------------------------------------------------------

Extremes = list[int]  # [high_seq, high_tokens, low_seq, low_tokens]


class ChartBlocks:
    """The blocks one write touches, merged into the stored rows on ``save``."""

    def __init__(self, model: type[ChartBlock] = ChartBlock) -> None:
        self.model = model  # a migration passes its historical model
        self.touched: dict[int, Extremes] = {}  # level-0 block index -> extremes

    def add(self, seq: int, high: int, low: int) -> None:
        """A context of ``high`` tokens at ``seq`` that came down to ``low`` there
        (a message: both its size)."""
        if seq < 0:
            return
        found = self.touched.get(seq // BASE)
        if found is None:
            self.touched[seq // BASE] = [seq, high, seq, low]
        else:
            merge(found, [seq, high, seq, low])

    def save(self, session: Session) -> None:
        """Merge the touched blocks into the session's rows at every level (one
        statement, whatever the number: ``_upsert``)."""
        if not self.touched:
            return
        wanted: dict[tuple[int, int], Extremes] = {}
        level_blocks = self.touched
        for level in range(LEVELS):
            above: dict[int, Extremes] = {}
            for index, extremes in level_blocks.items():
                wanted[(level, index)] = list(extremes)
                found = above.get(index // 2)
                if found is None:
                    above[index // 2] = list(extremes)
                else:
                    merge(found, extremes)
            level_blocks = above
        self.touched = {}
        _upsert(self.model, session.pk, wanted)


def _upsert(
    model: type[ChartBlock], session_pk: int, wanted: dict[tuple[int, int], Extremes]
) -> None:
    """Insert each block, or merge it into the stored one (``merge``'s rule, in
    SQL): one ``INSERT ... ON CONFLICT DO UPDATE`` statement, the same on
    SQLite and PostgreSQL, reading nothing back."""
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    hs, ht, ls, lt = (quote(c) for c in ("high_seq", "high_tokens", "low_seq", "low_tokens"))
    higher = (
        f"excluded.{ht} > {table}.{ht} "
        f"OR (excluded.{ht} = {table}.{ht} AND excluded.{hs} < {table}.{hs})"
    )
    lower = (
        f"excluded.{lt} < {table}.{lt} "
        f"OR (excluded.{lt} = {table}.{lt} AND excluded.{ls} < {table}.{ls})"
    )
    sql = (
        f"INSERT INTO {table} ({quote('session_id')}, {quote('level')}, {quote('index')}, "
        f"{hs}, {ht}, {ls}, {lt}) VALUES (%s, %s, %s, %s, %s, %s, %s) "
        f"ON CONFLICT ({quote('session_id')}, {quote('level')}, {quote('index')}) DO UPDATE SET "
        f"{hs} = CASE WHEN {higher} THEN excluded.{hs} ELSE {table}.{hs} END, "
        f"{ht} = CASE WHEN {higher} THEN excluded.{ht} ELSE {table}.{ht} END, "
        f"{ls} = CASE WHEN {lower} THEN excluded.{ls} ELSE {table}.{ls} END, "
        f"{lt} = CASE WHEN {lower} THEN excluded.{lt} ELSE {table}.{lt} END"
    )
    rows = [(session_pk, level, index, *extremes) for (level, index), extremes in wanted.items()]
    with connection.cursor() as cursor:
        cursor.executemany(sql, rows)


def merge(into: Extremes, other: Extremes) -> None:
    """Keep the higher high and the lower low; the earlier seq on a tie."""
    if other[1] > into[1] or (other[1] == into[1] and other[0] < into[0]):
        into[0], into[1] = other[0], other[1]
    if other[3] < into[3] or (other[3] == into[3] and other[2] < into[2]):
        into[2], into[3] = other[2], other[3]


def blocks_of(session: Session, level: int, last_index: int) -> Iterable[ChartBlock]:
    """The session's blocks of ``level`` with index 0 .. ``last_index``, in order."""
    return ChartBlock.objects.filter(session=session, level=level, index__lte=last_index).order_by(
        "index"
    )
