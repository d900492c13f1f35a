"""What SGLang's schedule_policy.py decides for the engine: the queue order, the next prefill batch
(PrefillAdder's budgets) and which requests a full KV pool retracts."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Protocol

from sglang_sim.params import EngineKnobs, Resolved
from sglang_sim.radix import RadixCache
from sglang_sim.request import Req, StepResult


class SchedulerState(Protocol):
    """What the policy reads and changes of the scheduler's state (`sglang_sim.engine.Engine` is one)."""

    knobs: EngineKnobs
    cfg: Resolved
    tree: RadixCache
    rng: random.Random
    waiting: list[Req]
    running: dict[str, Req]
    chunked: Req | None
    batch_is_full: bool
    counters: dict[str, float]
    retracted_since_report: int
    log: Callable[[str], None]

    @property
    def ratio(self) -> float:
        """The new-token ratio the admission budget reserves for running requests' remaining output."""
        ...

    def avail(self) -> int:
        """Free KV tokens (evictable cache included)."""
        ...

    def output_len(self, r: Req) -> int:
        """Tokens request `r` has generated so far."""
        ...

    def release(self, r: Req, t: float) -> None:
        """Free `r`'s KV at time `t` (its prefix stays in the cache)."""
        ...

    def set_ratio(self, value: float) -> None:
        """Set the new-token ratio (retraction raises it)."""
        ...

CLIP_MAX_NEW_TOKENS = 4096  # SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION
RETRACT_DECODE_STEPS = 20  # SGLANG_RETRACT_DECODE_STEPS
LPM_QUEUE_LIMIT = 128  # lpm falls back to fcfs above this queue length


def order_queue(eng: SchedulerState) -> list[Req]:
    """The waiting queue in the policy's order (SchedulePolicy.calc_priority)."""
    pol = eng.knobs.schedule_policy
    q = eng.waiting
    if pol in ("lpm", "dfs-weight") and len(q) <= LPM_QUEUE_LIMIT:
        return sorted(q, key=lambda r: -eng.tree.match_len(r.pages))
    if pol == "lof":
        return sorted(q, key=lambda r: -r.max_new)
    if pol == "random":
        q2 = list(q)
        eng.rng.shuffle(q2)
        return q2
    return q


def schedule_prefill(eng: SchedulerState, t: float) -> list[tuple[Req, int]]:
    """PrefillAdder: the chunked request first, then the ordered queue until a budget says no."""
    if eng.batch_is_full and eng.chunked is None:
        return []
    mrr = eng.cfg.max_running_requests
    rem_total = eng.avail() - sum(min(r.max_new - eng.output_len(r), CLIP_MAX_NEW_TOKENS)
                                  for r in eng.running.values()) * eng.ratio
    rem_input, rem_chunk = eng.knobs.max_prefill_tokens, eng.cfg.chunked_prefill_size
    batch: list[tuple[Req, int]] = []
    c = eng.chunked
    if c is not None:
        take = min(c.seq_len - c.done, rem_chunk)
        batch.append((c, take))
        rem_chunk -= take
        rem_input -= take
        rem_total -= take
        if c.done + take < c.seq_len:
            return batch
        eng.chunked = None
    if len(eng.running) >= mrr:
        eng.batch_is_full = True
        return batch
    for r in order_queue(eng):
        if len(eng.running) + len(batch) >= mrr:
            break
        path = eng.tree.match(r.pages, t)
        prefix = min(len(path) * eng.tree.page, r.seq_len - 1)
        path = path[:prefix // eng.tree.page]
        prefix = len(path) * eng.tree.page
        ext = r.seq_len - prefix
        if ext + min(r.max_new - r.out_base, CLIP_MAX_NEW_TOKENS) >= rem_total:
            eng.batch_is_full = True
            break
        if rem_chunk <= 0 or rem_input <= 0 or (ext > rem_input and batch):
            break
        take = ext if ext <= rem_chunk else rem_chunk - rem_chunk % eng.tree.page
        if take <= 0:
            break
        eng.tree.lock(path)
        r.path, r.prefix, r.done, r.private = path, prefix, prefix, 0
        r.cached_tokens += prefix
        r.status = "prefill"
        rem_total -= ext + min(r.max_new - r.out_base, CLIP_MAX_NEW_TOKENS)
        rem_chunk -= take
        rem_input -= take
        batch.append((r, take))
        if take < ext:
            eng.chunked = r
            break
    if batch:
        ids = {id(r) for r, _ in batch}
        eng.waiting = [r for r in eng.waiting if id(r) not in ids]
    return batch


def retract_decode(eng: SchedulerState, t: float, res: StepResult) -> None:
    """retract_decode with the 'length' policy: fewest outputs (then longest input) go first."""
    order = sorted(eng.running.values(), key=lambda r: (eng.output_len(r), -r.prompt_len), reverse=True)
    before, gained = eng.ratio, eng.avail()
    out: list[str] = []
    while len(order) > 1 and (not out or eng.avail() < RETRACT_DECODE_STEPS * len(order)):
        r = order.pop()
        eng.release(r, t)
        r.status, r.path, r.done, r.prefix = "waiting", [], 0, 0
        r.seq_len = r.prompt_len + r.out_base
        r.num_retractions += 1
        eng.waiting.append(r)
        out.append(r.rid)
    decoded = sum(eng.output_len(r) for r in order)
    eng.set_ratio(min(1.0, (decoded + RETRACT_DECODE_STEPS * len(order)) / (sum(r.max_new for r in order) + 1)))
    eng.counters["num_retracted_requests_total"] += len(out)
    eng.retracted_since_report += len(out)
    eng.batch_is_full = False
    res.retracted += out
    eng.log(f"KV cache pool is full. Retract requests. #retracted_reqs: {len(out)}, "
            f"#new_tokens_gained: {eng.avail() - gained}, #new_token_ratio: {before:.4f} -> {eng.ratio:.4f}")
