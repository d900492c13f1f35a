"""What a window's edge cut (issue 28 §5), in words (pure).

A cut request (sweep.analysis.measure: error_kind CUT) was sent in the window and still running when the drain grace
ended. It is cut only when its E2E exceeds drain_seconds plus what was left of the window after its send, so every cut
request ran longer than drain_seconds.

- cut share: n_cut / n_started.
- drain_note: when the cut share exceeds CUT_SHARE (1%), more than 1% of the window's requests ran past
  drain_seconds, so the window's E2E P99 over every request it sent is above drain_seconds: the note says
  "drain_seconds (N s) is shorter than the window's E2E P99 (M s)". M is the E2E P99 of the completed requests
  (RunStats.e2e_p99_ms) when that is above N; when it is not (the long requests were the ones cut), the note gives
  both: "(over N s: the completed requests' is M s, the cut ones ran longer)"; without a completed request, "(over
  N s: no request completed)". None at or below the share, for a window stored before cuts were counted (n_cut None)
  or without requests.
"""

from __future__ import annotations

from sweep.analysis.run_stats import RunStats

CUT_SHARE = 0.01


def cut_share(stats: RunStats) -> float | None:
    """n_cut / n_started; None without a count or without requests."""
    if stats.n_cut is None or not stats.n_started:
        return None
    return stats.n_cut / stats.n_started


def cut_text(stats: RunStats) -> str:
    """"cut 12 of 300 (4.0%)", "" when nothing was cut (or the window predates the count)."""
    share = cut_share(stats)
    return "" if not stats.n_cut or share is None else f"cut {stats.n_cut} of {stats.n_started} ({share:.1%})"


def _s(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds == int(seconds) else f"{seconds:.1f} s"


def drain_note(stats: RunStats, drain_s: float | None) -> str | None:
    """The window's drain was too short for its requests (module docstring), or None (a window stopped early cut
    what ran when it stopped, not at the drain's end: no note)."""
    share = cut_share(stats)
    if share is None or share <= CUT_SHARE or stats.stopped_early_by is not None:
        return None
    drain = "window.drain_seconds" if drain_s is None else f"drain_seconds ({_s(drain_s)})"
    p99 = None if stats.e2e_p99_ms is None else stats.e2e_p99_ms / 1000.0
    if p99 is not None and (drain_s is None or p99 > drain_s):
        m = _s(p99)
    elif drain_s is None:
        m = "unknown: no request completed"
    elif p99 is not None:
        m = f"over {_s(drain_s)}: the completed requests' is {_s(p99)}, the cut ones ran longer"
    else:
        m = f"over {_s(drain_s)}: no request completed"
    return (f"{drain} is shorter than the window's E2E P99 ({m}): {stats.n_cut} of {stats.n_started} requests "
            f"({share:.1%}) were still running when it ended (cut, not server errors)")
