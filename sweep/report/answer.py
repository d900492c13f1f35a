"""The final answer block (top of report.md/html, and the end of `sweep knee`) and `sweep explain`'s lines, from
sweep.views.answer.Answer: per tier the winner, its knee, goodput, gain over SGLang's defaults, binding constraint and
the shell-quoted launch command."""

from __future__ import annotations

from sweep import engines
from sweep.analysis.knee import ConfigKnee
from sweep.analysis.loads import load_text, load_words
from sweep.profile import SLA
from sweep.report.winner import launch_command, launch_warnings
from sweep.views.answer import Answer, TierAnswer


def sla_text(sla: SLA) -> str:
    """A tier's bounds in one phrase."""
    parts = [f"TTFT P{sla.ttft_percentile:g} ≤ {sla.ttft_ms:g} ms", f"TPOT P{sla.tpot_percentile:g} ≤ {sla.tpot_ms:g} ms"]
    if sla.e2e_ms is not None:
        parts.append(f"E2E P{sla.e2e_percentile:g} ≤ {sla.e2e_ms:g} ms")
    return ", ".join(parts) + f", errors ≤ {sla.max_error_rate:.1%}"


def _ci(k: ConfigKnee) -> str:
    """The knee goodput's 95% interval, in goodput's own unit (output tok/s)."""
    return ("no interval" if k.ci_low is None or k.ci_high is None
            else f"95% CI {k.ci_low:,.0f}–{k.ci_high:,.0f} output tok/s")


def _knee_text(k: ConfigKnee) -> str:
    return f"{load_text(k.concurrency, k.offered_rps)}, goodput {k.goodput_tps:,.0f} output tok/s ({_ci(k)})"


def _bracket_text(k: ConfigKnee, failing: float | None, at_top: bool) -> str:
    """The bracket's failing side, in the knee's unit: " (c=16 fails)", " (40.00 req/s fails)"; not bracketed only
    when the knee is the highest window measured (issue 28 §2), else goodput fell above it without a failure."""
    rate = k.offered_rps is not None
    if failing is None and not at_top:
        return " (goodput falls above it; nothing measured above fails)"
    if failing is None:
        return f" (top of the ladder: not bracketed, a higher {'rate' if rate else 'concurrency'} may do better)"
    return f" ({f'{failing:,.2f} req/s' if rate else f'c={failing:g}'} fails)"


def trace_text(k: ConfigKnee, rec: float, bracket: tuple[float, float | None] | None) -> str:
    """"holds the trace up to 2.6× its recorded rate (95% CI 2.1–3.2×; 1.90 req/s recorded)": the SLA boundary over
    the trace's recorded rate where the ladder was refined, else the knee (and the failing step above it)."""
    if k.boundary is not None and k.boundary_unit == "req/s":
        ci = ("" if k.boundary_ci_low is None or k.boundary_ci_high is None
              else f" (95% CI {k.boundary_ci_low / rec:.1f}–{k.boundary_ci_high / rec:.1f}×)")
        at = f"{k.boundary / rec:.1f}× its recorded rate{ci}"
    else:
        fails = bracket[1] if bracket is not None else None
        at = f"{(k.offered_rps or 0) / rec:.1f}× its recorded rate" + (
            f" (between {(k.offered_rps or 0) / rec:.1f}× passing and {fails / rec:.1f}× failing)" if fails else
            " (the highest scale measured passes: not bracketed)")
    return f"holds the trace up to {at}; recorded {rec:.2f} req/s"


def gain_text(t: TierAnswer) -> str:
    """The winner against SGLang's defaults, in one line."""
    g = t.gain
    if g is None:
        return "not measured (search.baseline is false)"
    if g.defaults_knee is None:
        return "SGLang's defaults never met this tier's SLA at any step: every byte of goodput is the gain"
    if g.defaults_won:
        return f"**SGLang's defaults win this tier** (knee {_knee_text(g.defaults_knee)}): no searched flag beat them"
    d = g.diff
    if d is None:
        return f"defaults' knee {_knee_text(g.defaults_knee)}"
    pct = "" if d.percent is None else f" ({d.percent:+.1f}%)"
    return (f"{d.delta_tps:+.0f} output tok/s{pct}, 95% CI of the difference {d.ci_low:+.0f} to {d.ci_high:+.0f}, "
            f"output tok/s, P(winner higher) {d.prob_higher:.2f}; defaults' own knee {_knee_text(g.defaults_knee)}")


def cost_text(answer: Answer, t: TierAnswer) -> str:
    """The cost per million output tokens at the knee (profile cost.gpu_hour_usd), the winner's and the defaults'."""
    if t.usd_per_mtok is None:
        return "no knee goodput to price"
    gpus = f"{t.gpus} GPU{'s' if t.gpus != 1 else ''} at ${answer.gpu_hour_usd:,.2f}/GPU-hour"
    line = f"${t.usd_per_mtok:,.3f} per million output tokens at the knee ({gpus})"
    if t.defaults_usd_per_mtok is not None:
        line += f"; SGLang's defaults: ${t.defaults_usd_per_mtok:,.3f} at their knee"
    elif t.gain is not None and t.gain.defaults_knee is None:
        line += "; SGLang's defaults: no knee (never met this tier's SLA)"
    return line


def tier_lines(answer: Answer, t: TierAnswer, dialect: engines.Dialect | None = None) -> list[str]:
    """One tier's part of the answer block."""
    head = f"### Tier `{t.tier}`{' (primary: steered the search)' if t.primary else ''}: {sla_text(t.sla)}"
    if t.knee is None or t.winner_id is None:
        why = answer.note or "no configuration passed this tier's SLA at any step"
        return [head, "", f"No winner: {why}.", ""]
    k = t.knee
    knee = load_words(k.concurrency, k.offered_rps)
    if t.bracket is not None:
        knee += _bracket_text(k, t.bracket[1], t.knee_at_top)
    if k.boundary is not None:
        ci = ("" if k.boundary_ci_low is None or k.boundary_ci_high is None
              else f" (95% CI {k.boundary_ci_low:.1f}–{k.boundary_ci_high:.1f})")
        at = f"{k.boundary:.1f} req/s" if k.boundary_unit == "req/s" else f"concurrency {k.boundary:.1f}"
        knee += f"; SLA boundary at {at}{ci}"
    if t.shape:
        knee += f", {t.shape}"
    out = [head, "",
           f"- **Winner**: {t.label}" + (" (screening windows only)" if t.screen_only else ""),
           f"- **Knee**: {knee}",
           *([f"- **Trace**: {trace_text(k, answer.trace_rps, t.bracket)}"] if answer.trace_rps and k.offered_rps
             else []),
           f"- **Goodput**: {k.goodput_tps:,.0f} output tok/s inside the SLA ({_ci(k)})",
           f"- **Gain over SGLang's defaults**: {gain_text(t)}"]
    if answer.gpu_hour_usd is not None:
        out.append(f"- **Cost**: {cost_text(answer, t)}")
    if t.binding is not None:
        out.append(f"- **Binding constraint**: {t.binding.line()}")
    if t.tied:
        tied = ", ".join(f"{answer.labels.get(c, c)} (P(winner higher) {t.win_prob.get(c, 0):.2f})" for c in t.tied)
        out.append(f"- **Ties** (the data do not rank these below the winner): {tied}")
    out += ["- **Launch**:", "", "```",
            launch_command(answer.model_path, dict(t.knobs), list(answer.extra_args), dialect), "```", ""]
    for w in launch_warnings(answer.model_path, list(answer.extra_args)):
        out += [w, ""]
    return out


def answer_lines(answer: Answer, dialect: engines.Dialect | None = None) -> list[str]:
    """The answer block: every tier, the primary first, then what the study cost (sweep.views.cost)."""
    out = ["## Answer" + (" (SIMULATED)" if answer.simulated else ""), ""]
    for t in answer.tiers:
        out += tier_lines(answer, t, dialect)
    if answer.screen_again is not None:
        out += [f"- **Screen ties**: {answer.screen_again.line(answer.labels).removeprefix('screen ties: ')}", ""]
    if answer.tie_break is not None:
        out += [f"- **Tie-break**: {answer.tie_break.line(answer.labels).removeprefix('tie-break: ')}", ""]
    if answer.cost is not None:
        out += [f"- **Cost**: {answer.cost.line().removeprefix('cost: ')}", ""]
    return out


def plain_lines(markdown: list[str]) -> list[str]:
    """Markdown lines (the answer block) as plain text for a terminal: no `#`, `**`, backticks or `>` marks, and a
    fenced command's lines as they are (copied from the terminal, they run)."""
    out, fenced = [], False
    for line in markdown:
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            out.append(line)
            continue
        text = line.lstrip("#").strip() if line.startswith("#") else line
        text = text.removeprefix("> ").replace("**", "").replace("`", "")
        out.append(text)
    return out


def explain_lines(answer: Answer, config_id: int | None = None) -> list[str]:
    """`sweep explain`: per tier, every configuration's (or one's) knee and binding constraint."""
    out = []
    for t in answer.tiers:
        out.append(f"tier {t.tier}{' (primary)' if t.primary else ''}: {sla_text(t.sla)}")
        ids = [config_id] if config_id is not None else sorted(t.bindings)
        for cid in ids:
            b = t.bindings.get(cid)
            k = t.knees.get(cid)
            mark = " [winner]" if cid == t.winner_id else ""
            knee = f"knee {_knee_text(k)}" if k is not None else "no passing step"
            out.append(f"  {answer.labels.get(cid, cid)} (config {cid}){mark}: {knee}")
            out.append(f"    why: {b.line()}" if b is not None else "    why: no measured step")
            if cid in t.win_prob:
                out.append(f"    P(winner's knee goodput higher): {t.win_prob[cid]:.2f}"
                           + (" (tie)" if cid in t.tied else ""))
    return out


def why_lines(answer: Answer) -> list[str]:
    """The report's "Why" section: per tier, every configuration's phase, binding constraint, knee and P(winner
    higher)."""
    out = ["## Why the knees are where they are", ""]
    for t in answer.tiers:
        if not t.bindings:
            continue
        out += [f"Tier `{t.tier}`:", "",
                "| configuration | phase | knee | binding | evidence | next | P(winner higher) |",
                "|---|---|---|---|---|---|---|"]
        for cid in sorted(t.bindings, key=lambda c: -(t.knees[c].goodput_tps if c in t.knees else -1.0)):
            b, k = t.bindings[cid], t.knees.get(cid)
            p = "winner" if cid == t.winner_id else (
                f"{t.win_prob[cid]:.2f}{' (tie)' if cid in t.tied else ''}" if cid in t.win_prob else "—")
            # a promoted configuration has a screening row and a final row: the phase tells them apart
            out.append(f"| {answer.labels.get(cid, cid)} | {k.phase if k else '—'} | {_knee_text(k) if k else 'none passes'} | "
                       f"{b.constraint} ({b.at}) | {b.evidence.replace('|', '/')} | {b.next_step} | {p} |")
        out.append("")
    return out
