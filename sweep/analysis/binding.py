"""Why a configuration's knee is where it is (pure): the binding constraint, read from the step just above the knee.

The step judged is the first failing step above the knee (the one that stopped the climb); without one, the first
step above the knee (the knee was chosen by flattening); without one, the knee step itself (the top of the ladder).
Its measured figures name one constraint, first match wins:

- client: the load generator's self-check flagged the window (RunStats.client_bound).
- errors: the step failed on its error rate, aborted or completed nothing.
- kv: KV-cache usage >= KV_FULL, or retractions (the scheduler evicted running requests for KV room).
- running-cap: running requests pinned at the configuration's max_running_requests (mean within max(1, 10%) of it:
  the mean includes the window's ramp) with a queue (mean >= 1).
- decode: the TPOT bound failed (decode batches too large or slow).
- prefill: the TTFT bound failed (requests wait to be prefilled) while KV had room.
- none: the ladder's top step passed with none of these signs: the ladder, not the server, bounds the knee.

Each verdict carries the numbers that show it, and one line on what to try next within the profile's search space.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sweep.analysis.ladder_steps import LadderStep
from sweep.analysis.run_stats import RunStats
from sweep.core.types import ServerConfig

KV_FULL = 0.95
RUNNING_PINNED = 0.9
CONSTRAINTS = ("client", "errors", "kv", "running-cap", "decode", "prefill", "none")


@dataclass(frozen=True)
class Binding:
    """The binding constraint of one configuration's knee: its label, the step it was read from, the evidence and
    the next thing to try."""

    constraint: str  # one of CONSTRAINTS
    concurrency: int  # the step judged
    evidence: str  # the measured numbers, e.g. "KV usage 0.98, 12 retractions, queue mean 7.1"
    next_step: str  # what to try, within the search space where it can

    def line(self) -> str:
        """One line: constraint, step, evidence, what to try."""
        return f"{self.constraint} at c={self.concurrency}: {self.evidence}. Next: {self.next_step}"


def judged_step(steps: Sequence[LadderStep], knee_concurrency: int) -> LadderStep | None:
    """The step whose figures explain the knee (see the module docstring)."""
    ladder = sorted(steps, key=lambda s: s.concurrency)
    above = [s for s in ladder if s.concurrency > knee_concurrency]
    failing = [s for s in above if not s.stats.passes_sla]
    if failing:
        return failing[0]
    if above:
        return above[0]
    at = [s for s in ladder if s.concurrency == knee_concurrency]
    return at[0] if at else (ladder[-1] if ladder else None)


def _f(v: float | None, spec: str = ".2f") -> str:
    return "n/a" if v is None else format(v, spec)


def _evidence(st: RunStats) -> str:
    parts = [f"KV usage max {_f(st.kv_usage_max)}", f"retractions {st.retractions}",
             f"queue mean {_f(st.queue_len_mean, '.1f')}", f"running mean {_f(st.running_mean, '.1f')}",
             f"TTFT P95 {_f(st.ttft_p95_ms, '.0f')} ms", f"TPOT P95 {_f(st.tpot_p95_ms, '.1f')} ms"]
    if st.error_rate:
        parts.append(f"errors {st.error_rate:.1%}")
    if st.sla_failures:
        parts.append(f"fails: {st.sla_failures}")
    return ", ".join(parts)


def _label(st: RunStats, mrr: int | None) -> str:
    fails = st.sla_failures or ""
    if st.client_bound:
        return "client"
    if "errors" in fails or "aborted" in fails or "no completed" in fails:
        return "errors"
    if (st.kv_usage_max is not None and st.kv_usage_max >= KV_FULL) or st.retractions > 0:
        return "kv"
    if (mrr is not None and st.running_mean is not None and st.running_mean >= mrr - max(1.0, (1 - RUNNING_PINNED) * mrr)
            and (st.queue_len_mean or 0.0) >= 1.0):
        return "running-cap"
    if "TPOT" in fails:
        return "decode"
    if "TTFT" in fails or "E2E" in fails:
        return "prefill"
    return "none"


def _space_top(space: Mapping[str, Sequence[Any]], knob: str) -> Any:
    vals = [v for v in space.get(knob, ()) if v is not None]
    return max(vals) if vals else None


def _next(label: str, config: ServerConfig, space: Mapping[str, Sequence[Any]]) -> str:
    """What to try next for this constraint, restricted to the search space where the space covers it."""
    if label == "client":
        return "measure again with more client processes (--client-procs); the server may have more to give"
    if label == "errors":
        return "read the server log of this launch (sweep show RUN); errors are not a tuning problem"
    if label == "kv":
        top, cur = _space_top(space, "mem_fraction_static"), config.mem_fraction_static
        if top is None:
            return ("mem_fraction_static is not searched: add it to search.space (a larger value gives the KV "
                    "cache more room), or use a smaller model / more GPUs")
        if cur is not None and cur >= top:
            return (f"KV-bound: mem_fraction_static is at the top of the space ({top:g}); a larger value or a "
                    "smaller model / more GPUs (tp) would move it")
        return f"KV-bound: a larger mem_fraction_static (the space goes up to {top:g})"
    if label == "running-cap":
        top, cur = _space_top(space, "max_running_requests"), config.max_running_requests
        if top is not None and cur is not None and cur < top:
            return f"raise max_running_requests (the space goes up to {top}); KV had room"
        return (f"max_running_requests is at the top of the space ({cur}); extend the space upward "
                "(KV had room) to move the knee")
    if label == "decode":
        return ("TPOT-bound: a smaller batch decodes each token faster: a lower max_running_requests"
                + (" (in the space)" if "max_running_requests" in space else " (add it to search.space)")
                + ", or more GPUs (tp)")
    if label == "prefill":
        return ("TTFT-bound while KV had room: prefill is the queue; try another chunked_prefill_size"
                + (" (in the space)" if "chunked_prefill_size" in space else " (add it to search.space)")
                + " or schedule_policy")
    return "the ladder's top step passed: extend the ladder upward to find where this configuration saturates"


def binding(steps: Sequence[LadderStep], knee_concurrency: int, config: ServerConfig,
            space: Mapping[str, Sequence[Any]]) -> Binding | None:
    """The binding constraint of a configuration's knee (`space`: sweep.profile.grid.grid of the search space);
    None without a step."""
    step = judged_step(steps, knee_concurrency)
    if step is None:
        return None
    label = _label(step.stats, config.max_running_requests)
    nxt = _next(label, config, space)
    if label == "none" and step.concurrency > knee_concurrency:
        nxt = ("the step above passed but its throughput flattened while latency rose (the knee rule): no single "
               "resource is saturated yet; a finer ladder between the two steps would place the knee closer")
    return Binding(label, step.concurrency, _evidence(step.stats), nxt)
