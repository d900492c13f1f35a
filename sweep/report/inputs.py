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
from sweep.workload.cache_model import GAP_FLAG, hit_gap

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


def cache_rows(ctx: StudyContext) -> list[tuple[RunRecord, float | None, bool]]:
    """(run, measured - predicted, flagged) for each completed step that has a prediction."""
    out = []
    for r in sorted(ctx.runs, key=lambda r: (r.server_config_id, r.phase or "", r.concurrency)):
        if r.status != "completed" or r.get("cache_hit_rate_predicted") is None:
            continue
        gap = hit_gap(r.number("cache_hit_rate"), r.number("cache_hit_rate_predicted"))
        out.append((r, gap, gap is not None and abs(gap) > GAP_FLAG))
    return out


def cache_lines(ctx: StudyContext) -> list[str]:
    """The prefix-cache section: measured hit rate next to the predicted one, gaps over GAP_FLAG flagged."""
    rows = cache_rows(ctx)
    if not rows:
        return []
    flush = ctx.raw("window").get("flush_cache", True)
    replay = ctx.raw("workload").get("replay", False)
    out = ["## Prefix cache: measured vs predicted", "",
           "Predicted: the hit rate the workload's shared prefixes allow (sweep/workload/cache_model.py: share × prefix "
           "tokens / mean prompt tokens, less the first touch of each prefix after the cache was emptied). "
           f"Cache emptied before every step: {'yes' if flush else 'no'}; requests "
           f"{'replayed from a pool' if replay else 'fresh (none sent twice to one server)'}.", "",
           "| config | phase | concurrency | measured | predicted | gap (points) | |", "|---|---|---|---|---|---|---|"]
    for r, gap, flagged in rows:
        hit, predicted = r.number("cache_hit_rate"), r.number("cache_hit_rate_predicted") or 0.0
        measured = "—" if hit is None else f"{hit * 100:.0f}%"
        out.append(f"| {ctx.labels.get(r.server_config_id)} | {r.phase} | {load_text(r)} | "
                   f"{measured} | {predicted * 100:.0f}% | "
                   f"{'—' if gap is None else f'{round(gap * 100):+d}'} | {'**⚠ gap > 10 points**' if flagged else ''} |")
    n_flagged = sum(1 for _, _, f in rows if f)
    if n_flagged:
        out += ["", f"> **{n_flagged} step(s) differ from the prediction by more than {GAP_FLAG * 100:.0f} points.** "
                "Above it: requests or media repeat (replay, the media pool) and the cache serves them; below it: "
                "the cache cannot hold the prefixes (eviction) or the server does not cache."]
    return out + [""]

