"""Session time (workload.sessions): the one definition that the sessions figures and the sla.session_s bound read.
Pure."""

from __future__ import annotations

from collections.abc import Iterable

from sweep.core.types import RequestRecord

__all__ = ["SessionTurn", "record_turn", "session_times_s"]

# One request of a session as the session time reads it: (session, turn, session_turns, warmup, failed, sent s,
# finished s or None). session_turns is set on every request of a session that ended (its last turn, or
# max_context), None on one the window cut off.
SessionTurn = tuple[int, int | None, int | None, bool, bool, float, float | None]


def session_times_s(rows: Iterable[SessionTurn]) -> list[float]:
    """Session time: seconds from a session's first send to the end of its last reply, for every session that
    completed (every request has session_turns, none failed or is unfinished) and whose last turn is measured (not
    warm-up); a session that began in the warm-up counts when it ends in the window."""
    by: dict[int, list[SessionTurn]] = {}
    for row in rows:
        if row[1] is not None:
            by.setdefault(row[0], []).append(row)
    out = []
    for reqs in by.values():
        last = reqs[0][2]
        if last is None or any(r[2] != last or r[4] or r[6] is None for r in reqs):
            continue
        if all(not r[3] for r in reqs if r[1] == last):
            out.append(max(r[6] or 0.0 for r in reqs) - min(r[5] for r in reqs))
    return out


def record_turn(r: RequestRecord) -> SessionTurn:
    """A driver's record as the session time reads it."""
    return (r.index, r.turn, r.session_turns, r.warmup, r.error is not None, r.sent_at, r.finished_at)
