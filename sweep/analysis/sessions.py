"""What a window of sessions (workload.sessions) did, turn by turn. Pure: stored request rows in, figures out.

A row is one sub-request of one turn (sweep.store: idx = the session's number, turn 1 = the first, session_turns set
on every row of a session that ended, by its last turn or max_context, and NULL on a session the window cut off).
Of a window's measured rows (not warm-up):
  - by turn index k: requests, TTFT P50 and P95 of the successful ones, and the cache hit rate
    sum(cached_tokens) / sum(prompt_tokens) — turn 1 against later turns is where the prefix cache shows;
  - sessions completed: sessions whose every row has session_turns set, none failed, and whose last turn's rows
    are measured (a session that began in the warm-up counts when it ends in the window);
  - turns per completed session (mean) and session time P50/P90 (sweep.analysis.session_time.session_times_s, the
    definition the optional sla.session_s bound judges): from the first turn's send to the last reply's end.
The `runs` columns of a session window (session_columns, of a driver's records: the row a record is stored as):
sessions_completed, turns_per_session, session_p50_s, session_p90_s, and the cache hit of turn 1
(cache_hit_turn1) and of every later turn together (cache_hit_later: sum(cached) / sum(prompt) over the measured
rows of turns >= 2) -- later turns resend the conversation, so a replay that dropped the earlier turns' context
shows there, and in later_prompt_tokens (the mean prompt tokens the server counted per later-turn request, which
shows it even where the server reports no cache hits: chat without --enable-cache-report). A window of single
requests has them all None.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypedDict

from sweep.analysis.measure import e2e_ms, percentile, ttft_ms
from sweep.analysis.session_time import session_times_s
from sweep.core.types import RequestRecord


class SessionColumns(TypedDict):
    """The session columns of one window, as RunStats' fields of the same names take them."""

    sessions_completed: int | None
    turns_per_session: float | None
    session_p50_s: float | None
    session_p90_s: float | None
    cache_hit_turn1: float | None
    cache_hit_later: float | None
    later_prompt_tokens: float | None


class TurnRow(Protocol):
    """What the figures read of one stored request row."""

    @property
    def idx(self) -> int: ...
    @property
    def turn(self) -> int | None: ...
    @property
    def warmup(self) -> bool: ...
    @property
    def error(self) -> str | None: ...
    @property
    def ttft_ms(self) -> float | None: ...
    @property
    def e2e_ms(self) -> float | None: ...
    @property
    def sent_at(self) -> float: ...
    @property
    def prompt_tokens(self) -> int: ...
    @property
    def cached_tokens(self) -> int: ...
    @property
    def session_turns(self) -> int | None: ...


@dataclass(frozen=True)
class TurnStats:
    """One turn index of a window."""

    turn: int
    requests: int
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None
    cache_hit: float | None  # cached / prompt tokens


@dataclass(frozen=True)
class SessionStats:
    """A window's sessions: completed ones, their length and time, and each turn index's figures."""

    sessions_completed: int
    turns_per_session: float | None
    session_p50_s: float | None
    session_p90_s: float | None
    by_turn: tuple[TurnStats, ...]

    def turn(self, k: int) -> TurnStats | None:
        return next((t for t in self.by_turn if t.turn == k), None)


def session_stats(rows: Iterable[TurnRow]) -> SessionStats | None:
    """The window's session figures (module docstring); None when no row belongs to a session."""
    rows = [r for r in rows if r.turn is not None]
    if not rows:
        return None
    by_turn: dict[int, list[TurnRow]] = defaultdict(list)
    for r in rows:
        if not r.warmup:
            by_turn[int(r.turn or 0)].append(r)
    turns = tuple(_turn(k, by_turn[k]) for k in sorted(by_turn))
    sessions: dict[int, list[TurnRow]] = defaultdict(list)
    for r in rows:
        sessions[r.idx].append(r)
    done = [s for s in sessions.values() if _completed(s)]
    lengths = [float(s[0].session_turns or 0) for s in done]
    times = session_times_s((r.idx, r.turn, r.session_turns, r.warmup, r.error is not None, r.sent_at,
                             r.sent_at + r.e2e_ms / 1000 if r.e2e_ms is not None else None) for r in rows)
    return SessionStats(len(done), sum(lengths) / len(lengths) if lengths else None,
                        percentile(times, 50), percentile(times, 90), turns)


def _turn(k: int, rows: Sequence[TurnRow]) -> TurnStats:
    ttfts = [r.ttft_ms for r in rows if r.error is None and r.ttft_ms is not None]
    prompt = sum(r.prompt_tokens for r in rows)
    return TurnStats(k, len(rows), percentile(ttfts, 50), percentile(ttfts, 95),
                     sum(r.cached_tokens for r in rows) / prompt if prompt else None)


def _completed(rows: Sequence[TurnRow]) -> bool:
    last = rows[0].session_turns
    if last is None or any(r.session_turns != last or r.error is not None for r in rows):
        return False
    return all(not r.warmup for r in rows if r.turn == last)


@dataclass(frozen=True)
class RecordRow:
    """A driver's record as the figures read a stored row (sweep.store.queries.request_rows stores the same)."""

    idx: int
    turn: int | None
    warmup: bool
    error: str | None
    ttft_ms: float | None
    e2e_ms: float | None
    sent_at: float
    prompt_tokens: int
    cached_tokens: int
    session_turns: int | None

    @classmethod
    def of(cls, r: RequestRecord) -> RecordRow:
        return cls(r.index, r.turn, r.warmup, r.error, ttft_ms(r), e2e_ms(r), r.sent_at, r.prompt_tokens,
                   r.cached_tokens, r.session_turns)


def session_columns(records: Iterable[RequestRecord]) -> SessionColumns:
    """The session columns of `runs` for a window's records (module docstring); all None without sessions."""
    rows = [RecordRow.of(r) for r in records]
    stats = session_stats(rows)
    if stats is None:
        return SessionColumns(sessions_completed=None, turns_per_session=None, session_p50_s=None, session_p90_s=None,
                              cache_hit_turn1=None, cache_hit_later=None, later_prompt_tokens=None)
    later = [r for r in rows if (r.turn or 0) >= 2 and not r.warmup]
    prompt = sum(r.prompt_tokens for r in later)
    first = stats.turn(1)
    return {"sessions_completed": stats.sessions_completed, "turns_per_session": stats.turns_per_session,
            "session_p50_s": stats.session_p50_s, "session_p90_s": stats.session_p90_s,
            "cache_hit_turn1": first.cache_hit if first is not None else None,
            "cache_hit_later": sum(r.cached_tokens for r in later) / prompt if prompt else None,
            "later_prompt_tokens": prompt / len(later) if later else None}
