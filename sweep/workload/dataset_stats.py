"""What a dataset holds, for `sweep dataset stats`: entries, turns per conversation, prompt and output length
distributions, its prefix-sharing potential and, for a timestamped file, how bursty its arrivals are."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from sweep.workload.importers import DatasetItem
from sweep.workload.prefix_cache import perfect_prefix_hits


@dataclass(frozen=True)
class Dist:
    """A distribution's summary: count, mean, p50/p90/p99 and max (zeros when empty)."""

    n: int
    mean: float
    p50: float
    p90: float
    p99: float
    max: float

    @staticmethod
    def of(values: Sequence[float]) -> Dist:
        if not values:
            return Dist(0, 0.0, 0.0, 0.0, 0.0, 0.0)
        a = np.asarray(values, dtype=float)
        p50, p90, p99 = np.percentile(a, [50, 90, 99]).tolist()
        return Dist(len(a), float(a.mean()), p50, p90, p99, float(a.max()))


@dataclass(frozen=True)
class DatasetStats:
    """One dataset's figures (see dataset_stats)."""

    entries: int
    turns: Dist  # user turns per conversation
    prompt_tokens: Dist  # each turn's new user message
    output_tokens: Dist  # each turn's output length: explicit, else the recorded reply's; turns with neither left out
    prefix_hit_tokens: int
    prompt_tokens_total: int
    interarrival_cv: float | None  # None without send times (or fewer than 3 entries)
    duration_s: float | None

    @property
    def prefix_share(self) -> float:
        """Share of prompt tokens a perfect (unbounded) prefix cache would hit over the file in order."""
        return self.prefix_hit_tokens / self.prompt_tokens_total if self.prompt_tokens_total else 0.0


def conversation_prompts(items: Sequence[DatasetItem]) -> Iterator[tuple[int, ...]]:
    """Each turn's prompt in file order, a conversation's turns one after another: turn k sends turns 1..k's
    user messages (the replies between them are the server's, unknown here, so they are left out)."""
    for item in items:
        context: tuple[int, ...] = ()
        for ids in (item.input_ids, *(t.input_ids for t in item.turns)):
            context = context + ids
            yield context


def burstiness(offsets: Sequence[float]) -> float | None:
    """Coefficient of variation of the gaps between send times (1 for Poisson arrivals, 0 for a steady rate,
    above 1 bursty); None with fewer than two gaps or no time between the first and last send."""
    gaps = np.diff(np.asarray(offsets, dtype=float))
    if len(gaps) < 2 or gaps.mean() <= 0:
        return None
    return float(gaps.std() / gaps.mean())


def dataset_stats(items: Sequence[DatasetItem]) -> DatasetStats:
    """The figures of a dataset's usable items, in file order."""
    turns = [(item.output_len, item.ref_output_len, len(item.input_ids)) for item in items]
    turns += [(t.output_len, t.ref_output_len, len(t.input_ids)) for item in items for t in item.turns]
    outputs = [float(out) for out in (o if o is not None else r for o, r, _ in turns) if out is not None]
    hit, total = perfect_prefix_hits(conversation_prompts(items))
    times = [it.send_at for it in items if it.send_at is not None]
    timed = len(times) == len(items) and len(items) > 0
    return DatasetStats(
        entries=len(items), turns=Dist.of([1 + len(it.turns) for it in items]),
        prompt_tokens=Dist.of([float(n) for _, _, n in turns]), output_tokens=Dist.of(outputs),
        prefix_hit_tokens=hit, prompt_tokens_total=total,
        interarrival_cv=burstiness(times) if timed else None, duration_s=(times[-1] - times[0]) if timed else None)
