"""Report sections on what a study sent: the inputs as sent and as the server counted them, and the prefix cache.

Both come from the store (the requests and runs tables), not from the profile: a dataset workload's prompt lengths
are the dataset's, and what the server counted (its usage / meta_info, or the simulator's count) can differ from
what sweep meant to send (media token estimates, chat templates, a tokenizer that splits a word).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sweep.report.tables import load_text
from sweep.store import RequestTokens, RunRecord
from sweep.views.study import StudyContext
from sweep.workload.cache_model import cache_flag

MODALITY_ORDER = ("text", "image", "video", "audio")


@dataclass(frozen=True)
class Dist:
    """Mean, P50 and P99 of some token counts."""

    mean: float
    p50: float
    p99: float

    def text(self) -> str:
        return f"{self.mean:,.0f} / {self.p50:,.0f} / {self.p99:,.0f}"


@dataclass(frozen=True)
class InputRow:
    """One modality's (or all requests') token distributions, as sent and as the server counted them."""

    modality: str
    requests: int
    sent_prompt: Dist | None
    counted_prompt: Dist | None
    sent_output: Dist | None  # max_new_tokens
    counted_output: Dist | None


def _dist(values: Sequence[int]) -> Dist | None:
    if not values:
        return None
    a = np.asarray(values, dtype=np.float64)
    return Dist(float(a.mean()), float(np.percentile(a, 50)), float(np.percentile(a, 99)))


def input_rows(rows: Sequence[RequestTokens]) -> list[InputRow]:
    """Per modality (then all together when there are several) from (modality, sent prompt, counted prompt,
    sent output, counted output, error) rows. Sent: every request that left the client; counted: the successes."""
    by: dict[str, list[RequestTokens]] = {}
    for row in rows:
        by.setdefault(str(row[0]), []).append(row)
    groups = [(m, by[m]) for m in sorted(by, key=lambda m: (MODALITY_ORDER + (m,)).index(m))]
    if len(groups) > 1:
        groups.append(("all", list(rows)))
    out = []
    for name, rs in groups:
        sent = [r for r in rs if r[1] is not None and not str(r[5] or "").startswith("never sent")]
        ok = [r for r in rs if r[5] is None]
        out.append(InputRow(name, len(sent), _dist([v for r in sent if (v := r[1]) is not None]),
                            _dist([r[2] for r in ok]), _dist([v for r in sent if (v := r[3]) is not None]),
                            _dist([r[4] for r in ok])))
    return out


def _cell(d: Dist | None) -> str:
    return "—" if d is None else d.text()


def input_lines(rows: Sequence[RequestTokens]) -> list[str]:
    """The 'Inputs as sent and as counted' section (markdown lines; the HTML report renders the same lines)."""
    table = input_rows(rows)
    out = ["## Inputs as sent and as the server counted them", "",
           "Measured requests of every completed step (warm-up excluded), from the requests table. Each cell is "
           "mean / P50 / P99 tokens. Sent prompt = text tokens + estimated media tokens; sent output = "
           "max_new_tokens; counted = the server's own usage counts of the requests that succeeded.", ""]
    if not table:
        return out + ["No measured requests are stored.", ""]
    out += ["| modality | requests | prompt sent | prompt counted | output sent (max) | output counted |",
            "|---|---|---|---|---|---|"]
    for r in table:
        out.append(f"| {r.modality} | {r.requests:,} | {_cell(r.sent_prompt)} | {_cell(r.counted_prompt)} | "
                   f"{_cell(r.sent_output)} | {_cell(r.counted_output)} |")
    return out + [""]


def cache_rows(ctx: StudyContext) -> list[tuple[RunRecord, str | None]]:
    """(run, why it is flagged or None) for each completed step that has a prediction."""
    out = []
    for r in sorted(ctx.runs, key=lambda r: (r.server_config_id, r.phase or "", r.concurrency)):
        s = r.stats
        if r.status != "completed" or s is None or s.cache_hit_rate_predicted is None:
            continue
        out.append((r, cache_flag(s.cache_hit_rate, s.cache_hit_rate_predicted, s.cache_hit_rate_capped)))
    return out


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{v * 100:.0f}%"


def cache_lines(ctx: StudyContext) -> list[str]:
    """The prefix-cache section: the measured hit rate between the two predictions from what was sent."""
    rows = cache_rows(ctx)
    if not rows:
        return []
    flush = ctx.raw("window").get("flush_cache", True)
    replay = ctx.raw("workload").get("replay", False)
    out = ["## Prefix cache: measured vs predicted from what was sent", "",
           "Predicted from the exact token sequences each window sent, in send order (every request since the cache "
           "was last emptied, the server's replies included as it caches them): **perfect** = the hit rate of an "
           "unbounded perfect prefix cache, an upper bound; **pool-capped** = the same cache held to the "
           "configuration's KV pool (LRU). A real radix cache lands near or between them "
           "(sweep/workload/cache_model.py). "
           f"Cache emptied before every step: {'yes' if flush else 'no'}; requests "
           f"{'replayed from a pool' if replay else 'fresh (none sent twice to one server)'}.", "",
           "| config | phase | concurrency | measured | perfect | pool-capped | |", "|---|---|---|---|---|---|---|"]
    for r, flag in rows:
        s = r.stats  # never None here: cache_rows keeps the windows that stored a prediction
        hits = (None, None, None) if s is None else (s.cache_hit_rate, s.cache_hit_rate_predicted,
                                                     s.cache_hit_rate_capped)
        out.append(f"| {ctx.labels.get(r.server_config_id)} | {r.phase} | {load_text(r)} | "
                   + " | ".join(_pct(h) for h in hits) + f" | {f'**⚠ {flag}**' if flag else ''} |")
    n_flagged = sum(1 for _, f in rows if f)
    if n_flagged:
        out += ["", f"> **{n_flagged} step(s) flagged.** Above the perfect-cache bound: the server hit tokens the "
                "client never sent twice (shared media or chat-template tokens), or its counts are wrong; far below "
                "the pool-capped prediction: the server kept much less than a cache of its pool would (eviction under "
                "running requests, a disabled cache)."]
    return out + [""]
