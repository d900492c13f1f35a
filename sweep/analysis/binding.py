"""Why a configuration's knee is where it is (pure): the binding constraint, read from the first failing window
above the knee.

The windows read are those of the knee's ladder (ladder_windows: the knee's phase, a refined ladder's refine windows
with its final ones, never the soak; without a knee, the final ladder when there is one, else the screen), in
order of their load (LadderStep.load: the concurrency, or in an open-loop rate ladder the offered rate in req/s).
The window judged is the first failing window above the knee's load (the one that stopped the climb); without one,
the first window above the knee (the knee was chosen by flattening); without one, the knee's own window (the top of
the ladder). A configuration without a knee: its first failing window. Its measured figures name one constraint,
first match wins:

- client: the load generator's self-check flagged the window (RunStats.client_bound).
- errors: the window failed on its error rate, aborted or completed nothing. Requests the drain cut are no errors
  (sweep.analysis.measure): they never make a window `errors`, nor does a window that completed nothing because
  the drain cut every request.
- decode: TPOT is the only latency bound that failed (no TTFT, E2E or session bound did): decode batches too large
  or slow, whatever the KV cache or the running cap show.
- kv: KV evidence: retractions (the scheduler evicted running requests for KV room), or KV-cache usage >= KV_FULL
  with a queue (mean >= 1: requests waited while the pool was full). A full pool that nobody waited for is not
  evidence.
- running-cap: running requests pinned at max_running_requests (mean within max(1, 10%) of it: the mean includes
  the window's ramp) with a queue (mean >= 1).
- decode: the TPOT bound failed (with others).
- prefill: the TTFT (or E2E) bound failed while KV had room.
- none: the ladder's top step passed with none of these signs: the ladder, not the server, bounds the knee.

Each verdict carries the numbers that show it (the requests the drain cut among them) and one line on what to try
next within the profile's search space. A knob the configuration leaves to the server (SGLang's defaults: every
knob) is read as SGLang resolved it (`resolved`: /server_info, stored at launch), for the label (running-cap's
max_running_requests) and the hint alike, never as the search space's values. A judged window with more than
CUT_SHARE of its requests cut leads its hint with sweep.analysis.window_edges.drain_note (drain_seconds is shorter
than the window's E2E P99). The window is named by its load (sweep.analysis.loads): "c=16", or "12.50 req/s" in a
rate ladder, never a ladder position.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sweep.analysis.knee import ConfigKnee
from sweep.analysis.ladder_steps import LadderStep, ladder_phase
from sweep.analysis.loads import knee_load, load_text
from sweep.analysis.run_stats import RunStats
from sweep.analysis.window_edges import cut_text, drain_note
from sweep.core.types import ServerConfig

KV_FULL = 0.95
RUNNING_PINNED = 0.9
QUEUED = 1.0  # queue mean at which requests are waiting (the kv and running-cap evidence)
CONSTRAINTS = ("client", "errors", "kv", "running-cap", "decode", "prefill", "none")


@dataclass(frozen=True)
class Binding:
    """The binding constraint of one configuration's knee: its label, the window it was read from, the evidence and
    the next thing to try."""

    constraint: str  # one of CONSTRAINTS
    concurrency: int  # the window judged
    evidence: str  # the measured numbers, e.g. "KV usage 0.98, 12 retractions, queue mean 7.1"
    next_step: str  # what to try, within the search space where it can
    offered_rps: float | None = None  # the judged window's offered rate in an open-loop rate ladder (its load)

    @property
    def at(self) -> str:
        """The judged window's load: "c=16", or "12.50 req/s" in a rate ladder."""
        return load_text(self.concurrency, self.offered_rps)

    def line(self) -> str:
        """One line: constraint, window, evidence, what to try."""
        return f"{self.constraint} at {self.at}: {self.evidence}. Next: {self.next_step}"


def ladder_windows(steps: Sequence[LadderStep], knee: ConfigKnee | None) -> list[LadderStep]:
    """The windows of the knee's ladder, by load (module docstring)."""
    ladders = [s for s in steps if s.phase != "soak"]
    phase = knee.phase if knee is not None else (
        "final" if any(ladder_phase(s.phase) == "final" for s in ladders) else "screen")
    return sorted((s for s in ladders if ladder_phase(s.phase) == phase), key=lambda s: s.load)


def judged_step(steps: Sequence[LadderStep], knee: ConfigKnee | None) -> LadderStep | None:
    """The window whose figures explain the knee (see the module docstring)."""
    ladder = ladder_windows(steps, knee)
    at = knee_load(knee) if knee is not None else None
    above = [s for s in ladder if at is None or s.load > at]
    failing = [s for s in above if not s.stats.passes_sla]
    if failing:
        return failing[0]
    if above:
        return above[0]
    own = [s for s in ladder if s.load == at]
    return own[0] if own else (ladder[-1] if ladder else None)


def _f(v: float | None, spec: str = ".2f") -> str:
    return "n/a" if v is None else format(v, spec)


def _evidence(st: RunStats) -> str:
    parts = [f"KV usage max {_f(st.kv_usage_max)}", f"retractions {st.retractions}",
             f"queue mean {_f(st.queue_len_mean, '.1f')}", f"running mean {_f(st.running_mean, '.1f')}",
             f"TTFT P95 {_f(st.ttft_p95_ms, '.0f')} ms", f"TPOT P95 {_f(st.tpot_p95_ms, '.1f')} ms"]
    if st.error_rate:
        parts.append(f"errors {st.error_rate:.1%}")
    if cut := cut_text(st):
        edge = "when the window stopped early" if st.stopped_early_by is not None else "by the drain's end"
        parts.append(f"{cut} {edge} (not errors)")
    if st.sla_failures:
        parts.append(f"fails: {st.sla_failures}")
    return ", ".join(parts)


def _tpot_only(fails: str) -> bool:
    """TPOT is the only latency bound the window failed."""
    return "TPOT" in fails and not any(b in fails for b in ("TTFT", "E2E", "session"))


def _label(st: RunStats, mrr: int | None) -> str:
    fails = st.sla_failures or ""
    queued = (st.queue_len_mean or 0.0) >= QUEUED
    if st.client_bound:
        return "client"
    if "errors" in fails or "aborted" in fails or ("no completed" in fails and (st.n_errors or not st.n_cut)):
        return "errors"  # a window whose every request the drain cut is no error: its drain note says why
    if _tpot_only(fails):
        return "decode"
    if st.retractions > 0 or (st.kv_usage_max is not None and st.kv_usage_max >= KV_FULL and queued):
        return "kv"
    if (mrr is not None and st.running_mean is not None
            and st.running_mean >= mrr - max(1.0, (1 - RUNNING_PINNED) * mrr) and queued):
        return "running-cap"
    if "TPOT" in fails:
        return "decode"
    if "TTFT" in fails or "E2E" in fails:
        return "prefill"
    return "none"


def _space_top(space: Mapping[str, Sequence[Any]], knob: str) -> Any:
    vals = [v for v in space.get(knob, ()) if v is not None]
    return max(vals) if vals else None


def _value(knob: str, config: ServerConfig, resolved: ServerConfig | None) -> tuple[Any, str]:
    """The knob's value the server ran with and where it came from: the configuration's, else SGLang's (its
    /server_info, " as SGLang resolved it"); (None, "") when neither says."""
    own = getattr(config, knob)
    if own is not None:
        return own, ""
    got = getattr(resolved, knob) if resolved is not None else None
    return got, (" as SGLang resolved it" if got is not None else "")


def _next(label: str, config: ServerConfig, space: Mapping[str, Sequence[Any]],
          resolved: ServerConfig | None = None) -> str:
    """What to try next for this constraint, restricted to the search space where the space covers it."""
    if label == "client":
        return "measure again with more client processes (--client-procs); the server may have more to give"
    if label == "errors":
        return "read the server log of this launch (sweep show RUN); errors are not a tuning problem"
    if label == "kv":
        top = _space_top(space, "mem_fraction_static")
        cur, src = _value("mem_fraction_static", config, resolved)
        now = f" (now {cur:g}{src})" if cur is not None else ""
        if top is None:
            return (f"mem_fraction_static{now} is not searched: add it to search.space (a larger value gives the KV "
                    "cache more room), or use a smaller model / more GPUs")
        if cur is not None and cur >= top:
            return (f"KV-bound: mem_fraction_static is {cur:g}{src}, at or above the top of the space ({top:g}); a "
                    "larger value or a smaller model / more GPUs (tp) would move it")
        return f"KV-bound: a larger mem_fraction_static{now} (the space goes up to {top:g})"
    if label == "running-cap":
        top = _space_top(space, "max_running_requests")
        cur, src = _value("max_running_requests", config, resolved)
        if top is None:
            return (f"max_running_requests ({cur}{src}) is not searched: add larger values to search.space "
                    "(KV had room)")
        if cur is not None and cur < top:
            return f"raise max_running_requests from {cur}{src} (the space goes up to {top}); KV had room"
        return (f"max_running_requests is {cur}{src}, at or above the top of the space ({top}); extend the space "
                "upward (KV had room) to move the knee")
    if label == "decode":
        cur, src = _value("max_running_requests", config, resolved)
        return ("TPOT-bound: a smaller batch decodes each token faster: a lower max_running_requests"
                + (f" than {cur}{src}" if cur is not None else "")
                + (" (in the space)" if "max_running_requests" in space else " (add it to search.space)")
                + ", or more GPUs (tp)")
    if label == "prefill":
        return ("TTFT-bound while KV had room: prefill is the queue; try another chunked_prefill_size"
                + (" (in the space)" if "chunked_prefill_size" in space else " (add it to search.space)")
                + " or schedule_policy")
    return "the ladder's top step passed: extend the ladder upward to find where this configuration saturates"


def binding(steps: Sequence[LadderStep], knee: ConfigKnee | None, config: ServerConfig,
            space: Mapping[str, Sequence[Any]], *, resolved: ServerConfig | None = None,
            drain_s: float | None = None) -> Binding | None:
    """The binding constraint of a configuration's knee (None: no knee; `space`: sweep.profile.grid.grid of the
    search space; `resolved`: the knobs as the server resolved them, /server_info; `drain_s`: the profile's
    window.drain_seconds, for the drain note); None without a window."""
    step = judged_step(steps, knee)
    if step is None:
        return None
    mrr, _ = _value("max_running_requests", config, resolved)
    label = _label(step.stats, mrr)
    nxt = _next(label, config, space, resolved)
    if label == "none" and (knee is None or step.load > knee_load(knee)):
        nxt = ("the step above passed but its throughput flattened while latency rose (the knee rule): no single "
               "resource is saturated yet; a finer ladder between the two steps would place the knee closer")
    if (note := drain_note(step.stats, drain_s)) is not None:
        nxt = f"{note}: raise window.drain_seconds past it and measure again; then {nxt}"
    return Binding(label, step.concurrency, _evidence(step.stats), nxt, step.offered_rps)
