"""The report's setup section, written for people: the stored profile and environment in words, no raw JSON."""

from __future__ import annotations

import re
from collections.abc import Sequence

from sweep.core.numbers import number
from sweep.profile import SLA, Arrival, LengthDist, SharedPrefix, Window, Workload
from sweep.profile.search import PRIOR_STARTUP_TRIALS
from sweep.report.tables import plain
from sweep.store import PriorRecord
from sweep.views.study import StudyContext

UNKNOWN = "unknown"


def code(text: object) -> str:
    """Any text (a path, a user's file name) as one markdown code span it cannot leave: on one line, fenced by one
    backtick more than its longest run of them, so no backtick in it ends the span and lets raw HTML through."""
    s = " ".join(str(text).split())
    longest = max((len(run) for run in re.findall(r"`+", s)), default=0)
    pad = " " if longest else ""
    return f"{'`' * (longest + 1)}{pad}{s}{pad}{'`' * (longest + 1)}"


def _num(v: float) -> str:
    return f"{v:g}" if abs(v) < 1000 else number(v)  # as typed in the profile; 12,000, never 1.2e+04


def length_text(d: LengthDist) -> str:
    """`uniform 64–512 tokens`, `fixed 128 tokens`, `lognormal mean 300, std 80 tokens (clamped 1–4096)`."""
    if d.kind == "fixed":
        body = f"fixed {d.value}"
    elif d.kind == "uniform":
        body = f"uniform {d.low}–{d.high}"
    else:
        body = f"{d.kind} mean {_num(d.mean or 0)}, std {_num(d.std or 0)}"
    default_clamp = d.min == LengthDist.model_fields["min"].default and d.max == LengthDist.model_fields["max"].default
    return body + " tokens" + ("" if default_clamp else f" (clamped to {d.min}–{d.max})")


def mix_text(w: Workload) -> str:
    """`text 60%, image 30%, video 10%`: only the modalities the workload sends."""
    shares = [(name, getattr(w.mix, name)) for name in ("text", "image", "video", "audio")]
    return ", ".join(f"{name} {share:.0%}" for name, share in shares if share > 0)


def prefix_text(p: SharedPrefix) -> str:
    if p.groups == 0 or p.share == 0:
        return "no shared prefixes"
    return f"{p.share:.0%} of requests start with one of {p.groups} shared {p.length}-token prefixes"


def dataset_output_text(w: Workload) -> str:
    """Which output lengths a dataset workload asks for: the file's own (workload.dataset.output_lengths
    "dataset"), or the profile's draw for every turn ("profile")."""
    assert w.dataset is not None
    drawn = length_text(w.output_len)
    if w.dataset.output_lengths == "profile":
        return f"{drawn}, the profile's for every turn (workload.dataset.output_lengths: profile)"
    return (f"the dataset's own (each turn's explicit length, else its recorded reply's; a turn with neither: "
            f"{drawn})")


def workload_text(w: Workload) -> str:
    """The configured input distribution in one sentence."""
    if w.dataset is not None:
        shared = prefix_text(w.shared_prefix)  # the prefixes go in front of the dataset's prompts too
        head = (f"dataset {code(w.dataset.path)} ({w.dataset.format}); output length {dataset_output_text(w)}; "
                + (shared if shared.startswith("no ") else f"{shared}, put in front of the dataset's prompts"))
    else:
        head = (f"{mix_text(w)}; prompt length {length_text(w.prompt_len)}; output length "
                f"{length_text(w.output_len)}; {prefix_text(w.shared_prefix)}")
    sent = (f"a replayed pool of {w.num_requests:,} requests" if w.replay
            else "fresh requests (none sent twice to one server)")
    return f"{head}; API `/{w.api}`; {sent}, seed {w.seed}"


def arrival_text(a: Arrival) -> str:
    """Closed loop, constant/Poisson/gamma rate or a trace, in words."""
    if a.kind == "closed":
        think = f", think time {_num(a.think_time_s)} s" if a.think_time_s else ""
        return f"closed loop (each client sends its next request when the last one ends{think})"
    cap = f", at most {a.max_in_flight:,} in flight"
    if a.kind == "trace":
        scale = f", gaps ×{_num(a.time_scale)}" if a.time_scale != 1 else ""
        scales = (f", at {', '.join(_num(s) + '×' for s in a.scales)} its recorded rate (one per ladder step)"
                  if a.scales else "")
        source = f"trace {code(a.path)}" if a.path else "the dataset's own send times"
        return f"open loop replaying {source}{scale}{scales}{cap}"
    rate = f"{', '.join(_num(r) for r in a.rates)} req/s per step" if a.rates else f"{_num(a.rate)} req/s"
    shape = ""
    if a.kind == "gamma":  # exactly one of cv and shape is set
        shape = f", gap cv {_num(a.cv)}" if a.cv is not None else f", shape {_num(a.shape or 0.0)}"
    return f"open loop, {a.kind} arrivals at {rate}{shape}{cap}"


def sla_text(s: SLA) -> str:
    """`TTFT P95 ≤ 1,000 ms, TPOT P95 ≤ 100 ms, errors ≤ 1%` (E2E only when bounded)."""
    parts = [f"TTFT P{s.ttft_percentile:g} ≤ {s.ttft_ms:,.0f} ms", f"TPOT P{s.tpot_percentile:g} ≤ {s.tpot_ms:,.0f} ms"]
    if s.e2e_ms is not None:
        parts.append(f"E2E P{s.e2e_percentile:g} ≤ {s.e2e_ms:,.0f} ms")
    parts.append(f"errors ≤ {s.max_error_rate:.1%}")
    return ", ".join(parts) + "; goodput counts the requests that finish within every bound"


def window_text(w: Window) -> str:
    """The window in words; its warm-up as the conditions it waits for (and the step's load, sweep.profile.warmup)."""
    warm = [f"{w.warmup_requests:,} requests completed"] if w.warmup_requests else []
    warm += [f"{_num(w.warmup_seconds)} s"] if w.warmup_seconds else []
    return (f"warm-up {' and '.join(warm) or 'none'}, measured {_num(w.measure_seconds)} s, drain "
            f"{_num(w.drain_seconds)} s, request timeout {_num(w.request_timeout_s)} s")


def _known(v: object) -> str:
    return UNKNOWN if v in (None, "") else str(v)


def _plain(v: object) -> str:
    """A stored value that no longer validates, still without JSON: nested keys joined, nulls dropped."""
    if isinstance(v, dict):
        return ", ".join(f"{k} {_plain(x)}" for k, x in v.items() if x is not None) or "—"
    if isinstance(v, list):
        return ", ".join(_plain(x) for x in v)
    return str(v)


def setup_lines(ctx: StudyContext) -> list[str]:
    """The setup section (report contract): where it ran and what was sent, every field in words."""
    study, env, raw = ctx.study, ctx.env, ctx.profile_raw
    gpu = _known(env.gpu_name)
    lines = ["## Setup (report contract)", "",
             f"- model path: {code(_known(env.model_path))}; SGLang version: "
             f"{plain(_known(env.sglang_version))}",
             f"- GPU: {gpu}" + (f" ×{env.gpu_count or 1}" if gpu != UNKNOWN else "")
             + f"; parallel: {_known(env.parallel)}",
             f"- profile `{study.profile_name}`, workload fingerprint `{study.fingerprint}`"
             + (f": {plain(raw['description'])}" if str(raw.get("description") or "").strip() else "")]
    prof = ctx.profile  # re-validated by study_context; None: another version's
    if prof is None:  # a profile stored by another version of sweep: its fields, in words
        lines += [f"- {k}: {_plain(raw[k])}" for k in ("workload", "arrival", "ladder", "window", "sla") if k in raw]
    else:
        lines += [f"- input distribution (configured): {workload_text(prof.workload)}",
                  f"- arrival: {arrival_text(prof.arrival)}; ladder {', '.join(str(c) for c in prof.ladder)}",
                  f"- window: {window_text(prof.window)}",
                  f"- SLA: {sla_text(prof.sla)}"]
    lines += prior_lines(ctx.prior)
    return lines + [f"- driver: {study.driver}; TPOT = (last − first token) / (tokens − 1) per request; "
                    "ITL counts a k-token chunk as k gaps", ""]


def prior_lines(prior: Sequence[PriorRecord], shown: int = 5) -> list[str]:
    """The simulated prior (search.prior: sim) in words: that it was used, the order it gave the trials, each
    configuration's predicted knee, and every configuration it dropped with its simulated goodput and the reason."""
    defaults = [r for r in prior if r.rank == 0]
    prior = [r for r in prior if r.rank > 0]
    if not prior:
        return []

    def one(r: PriorRecord) -> str:
        sim = "infeasible" if r.sim_goodput_tps is None else f"{r.sim_goodput_tps:,.0f} tok/s"
        knee = f", knee ~{r.knee_concurrency:g}" if r.knee_concurrency is not None else ""
        return f"#{r.rank} {r.label} ({sim}{knee}{', dropped' if r.dropped else ''})"

    more = f", … ({len(prior) - shown} more)" if len(prior) > shown else ""
    dropped = [r for r in prior if r.dropped]
    cut = (f"; {len(dropped)} not measured: infeasible on the simulator or more than {prior[0].margin:.0%} below "
           "its best (search.prior_margin)" if dropped and prior[0].margin is not None else "")
    base = (f"; SGLang's defaults: knee ~{defaults[0].knee_concurrency:g}"
            if defaults and defaults[0].knee_concurrency is not None else "")
    lines = [f"- search prior: the same study on the simulator first (study `{prior[0].prior_study}`, simulated, "
             f"virtual driver) ranked {len(prior)} configurations by simulated knee goodput; the real study's first "
             f"trials followed that order (grid: every measured configuration; tpe/gp: the top {PRIOR_STARTUP_TRIALS}): "
             f"{', '.join(one(r) for r in prior[:shown])}{more}{cut}{base}"]
    return lines + [f"  - dropped by the prior: {r.label}: {r.reason or 'below its margin'}" for r in dropped]
