"""Reports: the report contract checked, the article-style table, the knee, the winner's launch command, plots."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sglang_sim.fidelity import HELD_OUT
from sweep.analysis.run_stats import STORED_PERCENTILES, RunStats
from sweep.analysis.winner import Winner, hardware_lines
from sweep.core.types import JSON, KNOB_NAMES
from sweep.report.answer import answer_lines, why_lines
from sweep.report.inputs import cache_lines, input_lines
from sweep.report.sessions import session_lines
from sweep.report.setup import setup_lines
from sweep.report.tables import ci_text as _ci
from sweep.report.tables import configs_table, knee_cell, load_text, modality_table, plain, steps_table
from sweep.report.tables import fmt as _fmt
from sweep.report.trace import trace_lines
from sweep.report.winner import study_dialect, winner_lines
from sweep.store import EnvironmentRecord, RunRecord, RunSummary
from sweep.views.answer import Answer
from sweep.views.contract import ContractInput, missing_fields
from sweep.views.fixed_flags import differences
from sweep.views.study import StudyContext

SIM_BANNER = ("> **SIMULATED** — these numbers come from sweep's simulated SGLang server, not from a GPU. "
              "They exercise the tool; they are not a measurement of SGLang. How far to trust them: "
              f"{HELD_OUT.sentence()}.")

def missing_contract_fields(ctx: StudyContext) -> list[str]:
    """Report-contract fields (README.md, first paragraph) that the data cannot fill; a report with any may not
    conclude (the rule lives in sweep/views/contract.py; the read model's winner decision uses it too)."""
    return missing_fields(ContractInput(ctx.env, ctx.profile_raw, ctx.runs, ctx.winner.id if ctx.winner else None))


@dataclass(frozen=True)
class ReportFiles:
    """What write_report wrote: report.md, its plots, the contract fields it lacked, and report.html."""

    markdown: Path
    plots: list[Path]
    missing: list[str]
    html: Path | None = None


def _plots(ctx: StudyContext, out_dir: Path) -> list[Path]:
    """ladder.png and pareto.png (sweep/report/plots.py)."""
    from sweep.report.plots import plots

    return plots(ctx, out_dir)


def soak_lines(ctx: StudyContext) -> list[str]:
    """The soak section: each soak run's rate, stats and verdict recomputed from its stored samples."""
    soaks = [r for r in ctx.runs if r.phase == "soak"]
    if not soaks:
        return []
    out = ["## Soak (Poisson arrivals at the winner's knee rate)", ""]
    for r in soaks:
        verdict = ctx.soak_verdicts.get(r.id)
        text = verdict.summary() if verdict is not None else plain(r.reason or r.status)
        rate = (f"{r.offered_rps:,.2f} req/s offered (at most {r.concurrency} in flight)" if r.offered_rps is not None
                else f"at most {r.concurrency} in flight")
        s = r.stats  # None: the soak stored no statistics (it failed before its window ended)
        out += [f"- run {r.id} ({ctx.labels.get(r.server_config_id)}), {rate}, {r.status}, window "
                f"{_fmt(s and s.window_s)} s: throughput {_fmt(s and s.output_tps)} tok/s, goodput "
                f"{_fmt(s and s.goodput_tps)} tok/s, {_soak_ttft(ctx, r)}TTFT P99 "
                f"{_fmt(s and s.ttft_p99_ms, 2, 1e-3)} s, preemptions {_fmt(s and s.retractions)}, peak GPU "
                f"memory {_fmt(s and s.peak_gpu_mem_mib, 1, 1 / 1024)} GiB"
                + (" (**client-bound**: the load generator may have limited this window)"
                   if s and s.client_bound else ""), f"- **verdict**: {text}"]
    return out + [""]


def unmodelled_lines(env: EnvironmentRecord) -> list[str]:
    """The flags the simulator accepted but did not model (recorded at launch), as a warning block."""
    flags = env.sim_unmodelled_flags
    if not flags:
        return []
    return ["> **The simulator accepted but does not model these flags**; numbers that depend on them are not "
            "simulated:", *[f"> - `{f}`" for f in flags], ""]


def _soak_ttft(ctx: StudyContext, run: RunRecord) -> str:
    """`TTFT P95 3.50 s (SLA ≤ 2.00 s), ` for the SLA's own percentile when the runs table has it."""
    sla = ctx.raw("sla")
    q, bound = sla.get("ttft_percentile"), sla.get("ttft_ms")
    if not isinstance(q, int | float) or q == 99 or q not in STORED_PERCENTILES or bound is None:
        return ""
    value = run.stats.percentile_ms("ttft", q) if run.stats is not None else None
    return f"TTFT P{q:g} {_fmt(value, 2, 1e-3)} s (SLA ≤ {_fmt(bound, 2, 1e-3)} s), "


def title_lines(ctx: StudyContext) -> list[str]:
    """The title, the simulated banner and the simulator's unmodelled flags."""
    return [f"# Knee report: {ctx.study.name}", "", *([SIM_BANNER, ""] if ctx.study.simulated else []),
            *unmodelled_lines(ctx.env)]


def no_conclusion_lines(ctx: StudyContext) -> list[str]:
    """Why no winner is named when the report contract is not met."""
    missing = missing_contract_fields(ctx)
    if not missing:
        return []
    return ["## No conclusion", "", "The report contract is not met; missing: " + ", ".join(missing) + ".",
            "A report missing any of these fields may not name a winner.", ""]


def conclusion_lines(ctx: StudyContext, launch: bool = True) -> list[str]:
    """The hardware groups (a study on several GPU models), then the winner, or why every configuration lost;
    the winner's launch command unless `launch` is False (the answer block prints it)."""
    winner, hardware = ctx.winner, ctx.hardware
    out = hardware_lines(hardware, ctx.labels)
    if winner and not missing_contract_fields(ctx):
        out += winner_lines(ctx, winner, ctx.view, launch)
    elif winner is None and not (hardware and hardware.reason):
        why = ctx.decision.why_none() if ctx.decision is not None else "no configuration passed the SLA"
        out += ["## Winner", "", f"No winner: {plain(why)}.", ""]
    return out


def _crosscheck(ctx: StudyContext) -> list[str]:
    from sweep.report.crosscheck import crosscheck_lines

    return crosscheck_lines(ctx)


def configs_lines(ctx: StudyContext) -> list[str]:
    """The configurations table (sweep/report/tables.py)."""
    return configs_table(ctx, ctx.view)


# The report's sections, in the order report.md shows them; each reads the study context alone. The answer comes
# first (the title, then the answer block and the winner with its caveats and launch command): a reader who stops
# there can deploy; the evidence (setup, every step, every configuration) follows.
SECTIONS: tuple[Callable[[StudyContext], list[str]], ...] = (
    title_lines,
    no_conclusion_lines,
    conclusion_lines,
    setup_lines,
    steps_table,
    lambda ctx: input_lines(ctx.request_tokens),
    trace_lines,
    cache_lines,
    configs_lines,
    lambda ctx: modality_table(ctx, ctx.view),
    session_lines,
    soak_lines,
    _crosscheck,
)


def answer_sections(ctx: StudyContext, answer: Answer, out_dir: Path) -> dict[object, list[str]]:
    """The per-tier answer block (after the title: a reader of only this block can deploy) and the "Why" section
    (after the configurations table), keyed by the section they follow; answer.json is written beside the report."""
    missing = missing_contract_fields(ctx)
    (out_dir / "answer.json").write_text(answer.to_json() + "\n")
    block = (answer_lines(answer, study_dialect(ctx.profile_raw)) if not missing else
             ["## Answer", "", "No conclusion: the report contract is not met (see *No conclusion* below).", ""])
    return {title_lines: block, configs_lines: [] if missing else why_lines(answer)}


def write_report(ctx: StudyContext, out_dir: Path, answer: Answer | None = None) -> ReportFiles:
    """Write report.md (SECTIONS in order, the answer's sections after the ones they follow, then the plots) and
    report.html for a study context from the store."""
    from sweep.report.html import history_plot, write_html

    out_dir.mkdir(parents=True, exist_ok=True)
    after = answer_sections(ctx, answer, out_dir) if answer is not None else {}
    primary = next((t for t in answer.tiers if t.primary), None) if answer is not None else None
    answered = bool(after) and primary is not None and primary.knee is not None and primary.winner_id is not None
    # the launch command and its warnings once: in the answer block where it has one, else in the Winner section
    lines = [line for section in SECTIONS for line in (
        *(conclusion_lines(ctx, launch=False) if answered and section is conclusion_lines else section(ctx)),
        *after.get(section, []))]
    plots = _plots(ctx, out_dir)
    hist = history_plot(ctx, out_dir)
    plots += [hist] if hist else []
    lines += [f"![{p.stem}]({p.name})" for p in plots]
    md = out_dir / "report.md"
    md.write_text("\n".join(lines) + "\n")
    html = write_html(lines, plots, out_dir / "report.html", simulated=bool(ctx.study.simulated))
    return ReportFiles(md, plots, missing_contract_fields(ctx), html)


# `sweep compare`'s per-step rows: the statistic (a field, so mypy checks each), its label, decimals and scale
COMPARE_METRICS: tuple[tuple[Callable[[RunStats], float | int | bool | None], str, int, float], ...] = (
    (lambda s: s.output_tps, "throughput (tok/s)", 0, 1.0), (lambda s: s.goodput_tps, "goodput (tok/s)", 0, 1.0),
    (lambda s: s.ttft_p50_ms, "TTFT P50 (s)", 2, 1e-3), (lambda s: s.ttft_p99_ms, "TTFT P99 (s)", 2, 1e-3),
    (lambda s: s.tpot_p50_ms, "TPOT P50 (ms)", 1, 1.0), (lambda s: s.tpot_p99_ms, "TPOT P99 (ms)", 1, 1.0),
    (lambda s: s.cache_hit_rate, "cache hit", 2, 1.0), (lambda s: s.retractions, "preemptions", 0, 1.0),
    (lambda s: s.passes_sla, "SLA pass", 0, 1.0))


@dataclass(frozen=True)
class CompareSide:
    """One side of `sweep compare`: a stored run (its row), or a study (its context, compared by its winner)."""

    name: str
    fingerprint: str
    run: RunSummary | None = None  # the run_summary row, for a run
    ctx: StudyContext | None = None  # the study's context, for a study
    fixed: Mapping[str, str] = field(default_factory=dict)  # its study's fixed flags (sweep.views.fixed_flags)

    def steps(self) -> dict[float, RunRecord]:
        """Per load (concurrency, or an open-loop rate ladder's offered rate), the step this side contributes: a
        run's own, or a study's winner's ladder."""
        if self.run is not None:
            return {_load(self.run.run): self.run.run}
        win = self.ctx.winner if self.ctx is not None else None
        if self.ctx is None or win is None:
            return {}
        return {_load(r): r for r in self.ctx.runs
                if r.server_config_id == win.id and r.status == "completed"}

    def knobs(self) -> dict[str, JSON]:
        """Every knob by name (None where unset), then the searched flags it sets: the run's, or the study winner's."""
        if self.run is not None:
            return {**self.run.config.columns(), **self.run.config.flags}
        win = self.ctx.winner if self.ctx is not None else None
        return {**win.config.columns(), **win.config.flags} if win is not None else dict.fromkeys(KNOB_NAMES)

    def simulated(self) -> bool:
        if self.run is not None:
            return self.run.run.simulated
        return self.ctx is not None and self.ctx.study.simulated


def compare_markdown(a: CompareSide, b: CompareSide, forced: bool = False) -> str:
    """Two runs or two studies (their winners) side by side: knobs, per-step metrics and knees."""
    lines = [f"# Compare: {a.name} vs {b.name}", ""]
    if forced:
        lines += [f"> **WARNING: different workloads** (fingerprint {a.fingerprint} vs {b.fingerprint}); "
                  "these numbers are not comparable.", ""]
    else:
        lines += [f"Same workload fingerprint `{a.fingerprint}`.", ""]
    sim = [s.name for s in (a, b) if s.simulated()]
    if sim:
        lines += [f"> SIMULATED: {', '.join(sim)}", ""]
    ka, kb = a.knobs(), b.knobs()
    lines += ["## Knobs", "", f"| knob | {a.name} | {b.name} |", "|---|---|---|"]
    names = [*KNOB_NAMES, *sorted({*ka, *kb} - set(KNOB_NAMES))]  # the knobs, then every searched flag either sets
    lines += [f"| {k} | {_fmt_any(ka.get(k))} | {_fmt_any(kb.get(k))} |" for k in names]
    if a.fixed != b.fixed:
        lines[2:2] = [f"> **WARNING: different fixed flags** ({'; '.join(differences(a.fixed, b.fixed))}): "
                      "different servers.", ""]
    if a.ctx is not None and b.ctx is not None:
        lines += ["", "## Knees", "", f"| | {a.name} | {b.name} |", "|---|---|---|"]
        wa, wb = a.ctx.winner, b.ctx.winner
        rows: tuple[tuple[str, Callable[[Winner], object]], ...] = (
            ("knee (concurrency or offered rate)", lambda w: knee_cell(w.knee)),
            ("knee goodput (tok/s)", lambda w: _fmt(w.knee.goodput_tps)),
            ("95% CI (tok/s)", lambda w: _ci(w.knee)))
        for label, f in rows:
            lines.append(f"| {label} | {f(wa) if wa else '—'} | {f(wb) if wb else '—'} |")
        lines.append(f"| configurations | {len(a.ctx.configs)} | {len(b.ctx.configs)} |")
    sa, sb = a.steps(), b.steps()
    lines += ["", "## Per step", "", "| load | metric | " + f"{a.name} | {b.name} | B − A |",
              "|---|---|---|---|---|"]
    for c in sorted(set(sa) | set(sb)):
        for stat, label, nd, scale in COMPARE_METRICS:
            ra, rb = sa.get(c), sb.get(c)
            va, vb = (stat(ra.stats) if ra and ra.stats else None), (stat(rb.stats) if rb and rb.stats else None)
            diff = (_fmt((vb - va), nd, scale) if isinstance(va, int | float) and isinstance(vb, int | float)
                    and not isinstance(va, bool) else "")
            at = next(r for r in (ra, rb) if r is not None)
            lines.append(f"| {load_text(at)} | {label} | {_fmt(va, nd, scale)} | {_fmt(vb, nd, scale)} | {diff} |")
    return "\n".join(lines) + "\n"


def _load(r: RunRecord) -> float:
    """A step's load: its offered rate in an open-loop rate ladder, else its concurrency."""
    return r.offered_rps if r.offered_rps is not None else float(r.concurrency)


def _fmt_any(v: object) -> str:
    return "—" if v is None else str(v)
