"""When a measured prefix-cache hit rate is worth a warning, against what was sent. Pure: numbers in, a verdict out.

The predictions come from the exact token sequences a window sent (sweep.ladder.step_inputs, sweep.workload.sent,
sweep.workload.prefix_cache): `perfect` = the hit rate of an unbounded perfect prefix cache, an upper bound no
server can pass (it holds every token ever sent since the last flush, token-granular, and the replies the server
cached); `capped` = the same cache held to the configuration's KV pool (LRU), what a cache of that size keeps.
A real radix cache matches whole pages and shares its pool with running requests, so it lands between a little
below `capped` and `perfect`. Flagged:
  - measured above perfect by more than ABOVE (2 points): the server hit tokens the client never sent twice, so
    the prediction misses a repeat (media placeholders, chat-template tokens every chat request shares) or the
    counts are wrong;
  - measured below capped by more than GAP_FLAG (10 points): the server kept far less than a cache of its pool
    would (eviction under running requests, the cache disabled, or pages much larger than the shared runs).
"""

from __future__ import annotations

GAP_FLAG = 0.10  # measured this far below the pool-capped prediction is flagged
ABOVE = 0.02  # measured this far above the perfect-cache bound is flagged


def hit_gap(measured: float | None, predicted: float | None) -> float | None:
    """measured - predicted, in rate units (0.1 = 10 points); None when either is unknown."""
    if measured is None or predicted is None:
        return None
    return measured - predicted


def cache_flag(measured: float | None, perfect: float | None, capped: float | None) -> str | None:
    """Why a measured hit rate is suspicious against the two predictions (module docstring); None when it is not."""
    if measured is None or perfect is None:
        return None
    if measured > perfect + ABOVE:
        return f"above the perfect-cache bound by {round((measured - perfect) * 100)} points"
    if capped is not None and measured < capped - GAP_FLAG:
        return f"{round((capped - measured) * 100)} points below a cache of the KV pool's size"
    return None
