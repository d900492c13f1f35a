"""A window's or a knee's load as people read it (pure), one rule for every knee, "why", table and the live page.

In an open-loop rate ladder (arrival.rates) a window's load is the rate it was offered, in req/s: its concurrency
there is only its in-flight cap, or the ladder position of the step a refinement window bisects, and is never shown
as its load. Elsewhere the load is the client concurrency.

- load_text: "12.50 req/s" (offered rate) or "c=16".
- load_words: the same in a sentence: "12.50 req/s" or "concurrency 16".
- knee_load: the knee's place along its ladder (its offered rate, else its concurrency), for comparing with
  LadderStep.load.
"""

from __future__ import annotations

from typing import Protocol


class Loaded(Protocol):
    """What has a load: a knee (sweep.analysis.knee.ConfigKnee) or a window, by its concurrency and offered rate."""

    @property
    def concurrency(self) -> int: ...

    @property
    def offered_rps(self) -> float | None: ...

RATE_UNIT = "req/s"


def load_text(concurrency: int, offered_rps: float | None) -> str:
    """"12.50 req/s" in an open-loop rate ladder, else "c=16"."""
    return f"{offered_rps:,.2f} {RATE_UNIT}" if offered_rps is not None else f"c={concurrency}"


def load_words(concurrency: int, offered_rps: float | None) -> str:
    """"12.50 req/s" in an open-loop rate ladder, else "concurrency 16"."""
    return f"{offered_rps:,.2f} {RATE_UNIT}" if offered_rps is not None else f"concurrency {concurrency}"


def knee_load(knee: Loaded) -> float:
    """The knee's load: its offered rate in a rate ladder, else its concurrency (LadderStep.load's unit)."""
    return knee.offered_rps if knee.offered_rps is not None else float(knee.concurrency)
