"""Report section on a dataset's fit and a trace's own timing: entries clipped or dropped to fit the server's context
(workload.dataset.overlong), and a trace replay's burstiness next to each window's, so a calm slice is not taken for
the day. From the study's stored environment (sweep.workload.overlong.input_facts) and its windows' sends."""

from __future__ import annotations

from sweep.analysis.loads import load_text
from sweep.profile.trace import PEAK_SPAN_S
from sweep.store.environment_record import DatasetFit
from sweep.views.study import StudyContext


def _num(x: object, fmt: str = ".2f") -> str:
    return format(float(x), fmt) if isinstance(x, int | float) else "-"


def fit_line(fit: DatasetFit) -> str:
    """"3 of 40 entries clipped ..." or "all 40 entries fit ..." from the stored dataset_fit."""
    n, clipped, dropped = fit.entries, fit.clipped, fit.dropped
    limit = f"{fit.context_len:,}" if fit.context_len is not None else "?"
    if not clipped and not dropped:
        return f"- Dataset fit: all {n} entries fit the server's context of {limit} tokens (prompt + requested output)."
    done = " and ".join(x for x in (f"**{clipped} clipped**" if clipped else "",
                                    f"**{dropped} dropped**" if dropped else "") if x)
    return (f"- Dataset fit: {done} of {n} entries to fit the server's context of {limit} tokens (prompt + "
            f"requested output; workload.dataset.overlong: {fit.policy}).")


def trace_lines(ctx: StudyContext) -> list[str]:
    """The section: the dataset's fit, the trace's own timing and each window's (nothing without either)."""
    fit, trace = ctx.env.dataset_fit, ctx.env.trace
    if fit is None and trace is None:
        return []
    out = ["## Dataset and trace timing", ""]
    if fit is not None:
        out.append(fit_line(fit))
    if trace is None:
        return [*out, ""]
    rec = trace.recorded_rps
    out.append(f"- The trace (from {_num(trace.start_s, 'g')} s in): {trace.sends} sends over "
               f"{_num(trace.span_s, ',.0f')} s, recorded rate {_num(rec)} req/s; gap CV "
               f"{_num(trace.gap_cv)} (1 = Poisson), peak {PEAK_SPAN_S:g} s rate / mean "
               f"{_num(trace.peak_ratio)}.")
    if not ctx.send_bursts:
        return [*out, ""]
    out += ["", "Each window's measured sends next to the trace's own (a window calmer than the trace judged it on "
            "less than the day's bursts):", "",
            "| configuration | phase | load | × recorded | sends | gap CV | peak / mean |", "|---|---|---|---|---|---|---|"]
    for r in ctx.runs:
        b = ctx.send_bursts.get(r.id)
        if b is None:
            continue
        scale = f"{r.offered_rps / rec:.2f}×" if r.offered_rps is not None and rec \
            else "-"
        out.append(f"| {ctx.labels.get(r.server_config_id, '?')} | {r.phase} | {load_text(r.concurrency, r.offered_rps)}"
                   f" | {scale} | {b.sends} | {_num(b.gap_cv)} | {_num(b.peak_ratio)} |")
    out.append(f"| the trace | | {_num(rec)} req/s | 1.00× | {trace.sends} | {_num(trace.gap_cv)} | "
               f"{_num(trace.peak_ratio)} |")
    return [*out, ""]
