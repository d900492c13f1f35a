"""The prefix-cache hit rate a workload's shared prefixes predict for one window. Pure: numbers in, numbers out.

Tokens are prompt tokens as sweep sends them (text tokens plus the estimated media tokens,
sweep.workload.requests.estimated_prompt_tokens). Of the workload:
  L  = shared_prefix.length, G = shared_prefix.groups;
  s  = the share of requests that start with a shared prefix;
  P  = the mean prompt tokens of a request;
both s and P taken over the workload's first SAMPLE requests as sweep.workload.requests.make_block makes them (the very
requests a study sends), so clamps, the minimum tail after a prefix and dataset prompts count as generated.

A request that starts with prefix g can reuse g's L tokens from the cache once an earlier request carried g since the
cache was last emptied; that first request of each group misses ("first touch"). For a window of n requests that
follows a requests sent since the cache was emptied (the warm-up, plus earlier steps when window.flush_cache is off),
each request carries a given group with probability s/G, so the expected first touches inside the window are
  F = G * ((1 - s/G)^a - (1 - s/G)^(a + n))
and the predicted hit rate is
  predicted = (s*n*L - F*L) / (n*P) = (s*L / P) * (1 - F / (s*n)).
Nothing else in a generated workload repeats (tails are fresh random ids and no request is sent twice without
workload.replay), so the model leaves out: chance matches of a token or two between tails, pooled media that can
match (sweep.workload.media), chat-template tokens every chat request shares, and eviction. A measured rate far
above the prediction means requests repeat (replay, media pool); far below, the cache cannot hold the G prefixes
(eviction) or the server does not cache. GAP_FLAG is the difference that the report flags.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sweep.core.types import RequestSpec
from sweep.profile import Workload
from sweep.workload.requests import estimated_prompt_tokens

SAMPLE = 1000  # requests of the workload that s and P are taken over
GAP_FLAG = 0.10  # |measured - predicted| above this (10 points) is flagged in the report


@dataclass(frozen=True)
class PrefixShape:
    """The shared-prefix facts of a workload that the prediction needs."""

    groups: int
    length: int  # L, tokens
    share: float  # s
    mean_prompt_tokens: float  # P


def prefix_shape(w: Workload, sample: Sequence[RequestSpec]) -> PrefixShape:
    """s and P over `sample` (the workload's first requests), L and G from the profile."""
    n = len(sample)
    sp = w.shared_prefix
    active = sp.groups > 0 and sp.share > 0
    share = sum(1 for s in sample if s.prefix_group is not None) / n if n and active else 0.0
    mean = sum(estimated_prompt_tokens(s) for s in sample) / n if n else 0.0
    return PrefixShape(groups=sp.groups if active else 0, length=sp.length, share=share, mean_prompt_tokens=mean)


def predicted_hit_rate(shape: PrefixShape, before: int, n: int) -> float | None:
    """The hit rate over a window of n requests that follows `before` requests since the cache was emptied."""
    if n <= 0 or shape.mean_prompt_tokens <= 0:
        return None
    if shape.groups <= 0 or shape.share <= 0:
        return 0.0
    miss = 1.0 - shape.share / shape.groups
    first_touches = shape.groups * (miss ** max(before, 0) - miss ** (max(before, 0) + n))
    hits = (shape.share * n - first_touches) * shape.length
    return max(0.0, hits / (n * shape.mean_prompt_tokens))


def hit_gap(measured: float | None, predicted: float | None) -> float | None:
    """measured - predicted, in rate units (0.1 = 10 points); None when either is unknown."""
    if measured is None or predicted is None:
        return None
    return measured - predicted
