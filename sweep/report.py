"""Reports: the report contract checked, the article-style table, the knee, the winner's launch command, plots."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SIM_BANNER = ("> **SIMULATED** — these numbers come from sweep's simulated SGLang server, not from a GPU. "
              "They exercise the tool; they are not a measurement of SGLang.")

CONTRACT = {
    "model path": lambda c: c["env"].get("model_path"),
    "SGLang version": lambda c: c["env"].get("sglang_version"),
    "GPU model": lambda c: c["env"].get("gpu_name"),
    "parallel configuration": lambda c: c["env"].get("parallel"),
    "input distribution": lambda c: c["profile"].get("workload"),
    "arrival pattern": lambda c: c["profile"].get("arrival"),
    "concurrency": lambda c: c["runs"] and [r["concurrency"] for r in c["runs"]],
    "warm-up amount": lambda c: c["runs"] and c["runs"][0].get("warmup_requests") is not None,
    "measured duration": lambda c: c["runs"] and c["runs"][0].get("window_s"),
    "mean throughput": lambda c: _all(c, "output_tps"),
    "TTFT P50/P99": lambda c: _all(c, "ttft_p50_ms") and _all(c, "ttft_p99_ms"),
    "TPOT P50/P99": lambda c: _all(c, "tpot_p50_ms") and _all(c, "tpot_p99_ms"),
    "goodput": lambda c: _all(c, "goodput_tps"),
    "cache hit rate": lambda c: _all(c, "cache_hit_rate"),
    "preemption count": lambda c: _all(c, "retractions"),
    "peak GPU memory": lambda c: _all(c, "peak_gpu_mem_mib"),
}


def _all(ctx: dict[str, Any], col: str) -> bool:
    runs = [r for r in ctx["runs"] if r["status"] == "completed"]
    return bool(runs) and all(r.get(col) is not None for r in runs)


def missing_contract_fields(ctx: dict[str, Any]) -> list[str]:
    """Report-contract fields (DIGEST.md) that the data cannot fill; a report with any may not conclude."""
    missing = []
    for name, probe in CONTRACT.items():
        try:
            ok = probe(ctx)
        except (KeyError, TypeError, IndexError):
            ok = None
        if ok in (None, False, "", []):
            missing.append(name)
    return missing


@dataclass
class ReportFiles:
    markdown: Path
    plots: list[Path]
    missing: list[str]
    html: Path | None = None


def _fmt(v: Any, nd: int = 0, scale: float = 1.0) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return f"{v * scale:,.{nd}f}"


def launch_command(model_path: str, knobs: dict[str, Any], extra_args: list[str]) -> str:
    """The ready-to-paste command for the winning configuration."""
    parts = ["python -m sglang.launch_server", f"--model-path {model_path}"]
    for k, v in knobs.items():
        if v is not None:
            parts.append(f"--{k.replace('_', '-')} {v}")
    i = 0
    while i < len(extra_args):  # keep each flag on one line with its value
        if i + 1 < len(extra_args) and not extra_args[i + 1].startswith("--"):
            parts.append(f"{extra_args[i]} {extra_args[i + 1]}")
            i += 2
        else:
            parts.append(extra_args[i])
            i += 1
    parts.append("--enable-metrics")
    return " \\\n  ".join(parts)


def _plots(ctx: dict[str, Any], out_dir: Path) -> list[Path]:
    by_cfg: dict[int, list[dict[str, Any]]] = {}
    aborted = {c["id"] for c in ctx["configs"] if c["status"] == "aborted"}
    for r in ctx["runs"]:
        if r["status"] == "completed" and r.get("phase") != "soak" and r["server_config_id"] not in aborted:
            by_cfg.setdefault(r["server_config_id"], []).append(r)
    if not by_cfg:
        return []
    panels = [("output_tps", "throughput (output tok/s)"), ("goodput_tps", "goodput (output tok/s)"),
              ("ttft_p99_ms", "TTFT P99 (ms)"), ("tpot_p99_ms", "TPOT P99 (ms)"),
              ("cache_hit_rate", "cache hit rate"), ("retractions", "retractions"),
              ("kv_usage_max", "KV usage max"), ("queue_len_mean", "queue length mean")]
    fig, axes = plt.subplots(2, 4, figsize=(18, 8))
    for ax, (col, title) in zip(axes.flat, panels, strict=False):
        for cid, runs in sorted(by_cfg.items()):
            runs = sorted(runs, key=lambda r: r["concurrency"])
            xs = [r["concurrency"] for r in runs]
            ys = [r.get(col) if r.get(col) is not None else float("nan") for r in runs]
            dash = "--" if runs[0].get("phase") == "screen" else "-"
            ax.plot(xs, ys, dash, marker="o", label=ctx["labels"].get(cid, str(cid)) + _phase_tag(runs[0]))
        ax.set_xscale("log", base=2)
        steps = sorted({r["concurrency"] for runs in by_cfg.values() for r in runs})
        ax.set_xticks(steps, [str(c) for c in steps])  # the ladder's own steps, not powers of two
        ax.minorticks_off()
        ax.set_title(title)
        ax.set_xlabel("client concurrency")
    axes.flat[0].legend(fontsize=7)
    title = ctx["study"]["name"] + ("  [SIMULATED]" if ctx["study"].get("simulated") else "")
    fig.suptitle(title)
    fig.tight_layout()
    p1 = out_dir / "ladder.png"
    fig.savefig(p1, dpi=90)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 5))
    for cid, runs in sorted(by_cfg.items()):
        ax.scatter([r.get("ttft_p99_ms") or float("nan") for r in runs], [r.get("goodput_tps") or 0 for r in runs],
                   label=ctx["labels"].get(cid, str(cid)))
    ax.set_xlabel("TTFT P99 (ms)")
    ax.set_ylabel("goodput (output tok/s)")
    ax.set_title("goodput vs TTFT P99 (every step)" + (" [SIMULATED]" if ctx["study"].get("simulated") else ""))
    ax.legend(fontsize=7)
    fig.tight_layout()
    p2 = out_dir / "pareto.png"
    fig.savefig(p2, dpi=90)
    plt.close(fig)
    return [p1, p2]


def _phase_tag(run: dict[str, Any]) -> str:
    return " (screen)" if run.get("phase") == "screen" else ""


def _ci(knee: dict[str, Any]) -> str:
    lo, hi = knee.get("ci_low"), knee.get("ci_high")
    return "—" if lo is None or hi is None else f"{lo:,.0f}–{hi:,.0f}"


def soak_lines(ctx: dict[str, Any]) -> list[str]:
    """The soak section: each soak run's rate, stats and verdict recomputed from its stored samples."""
    soaks = [r for r in ctx["runs"] if r.get("phase") == "soak"]
    if not soaks:
        return []
    out = ["## Soak (Poisson arrivals at the winner's knee rate)", ""]
    for r in soaks:
        verdict = ctx.get("soak_verdicts", {}).get(r["id"])
        text = verdict.summary() if verdict is not None else (r.get("reason") or r["status"])
        out += [f"- run {r['id']} ({ctx['labels'].get(r['server_config_id'])}), {r['status']}, window "
                f"{_fmt(r.get('window_s'))} s: throughput {_fmt(r.get('output_tps'))} tok/s, goodput "
                f"{_fmt(r.get('goodput_tps'))} tok/s, TTFT P99 {_fmt(r.get('ttft_p99_ms'), 2, 1e-3)} s, "
                f"preemptions {_fmt(r.get('retractions'))}", f"- **verdict**: {text}"]
    return out + [""]


def write_report(ctx: dict[str, Any], out_dir: Path) -> ReportFiles:
    """Write report.md (and PNG plots) for a study context gathered from the store."""
    out_dir.mkdir(parents=True, exist_ok=True)
    study, env, profile = ctx["study"], ctx["env"], ctx["profile"]
    missing = missing_contract_fields(ctx)
    lines: list[str] = [f"# Knee report: {study['name']}", ""]
    if study.get("simulated"):
        lines += [SIM_BANNER, ""]
    lines += ["## Setup (report contract)", "",
              f"- model path: `{env.get('model_path')}`; SGLang version: `{env.get('sglang_version')}`",
              f"- GPU: {env.get('gpu_name')} ×{env.get('gpu_count') or 1}; parallel: {env.get('parallel')}",
              f"- profile `{study.get('profile_name')}`, workload fingerprint `{study.get('fingerprint')}`",
              f"- input distribution: {json.dumps(profile.get('workload', {}).get('mix'))}; prompt length "
              f"{json.dumps(profile.get('workload', {}).get('prompt_len'))}; output length "
              f"{json.dumps(profile.get('workload', {}).get('output_len'))}",
              f"- arrival: {json.dumps(profile.get('arrival'))}; ladder {profile.get('ladder')}",
              f"- window: warm-up {profile.get('window', {}).get('warmup_requests')} requests / "
              f"{profile.get('window', {}).get('warmup_seconds')} s, measured "
              f"{profile.get('window', {}).get('measure_seconds')} s, drain {profile.get('window', {}).get('drain_seconds')} s",
              f"- SLA: {json.dumps(profile.get('sla'))}",
              f"- driver: {study.get('driver')}; TPOT = (last − first token) / (tokens − 1) per request; "
              "ITL counts a k-token chunk as k gaps", ""]
    lines += ["## Every configuration and step", "",
              "Screening rows (phase `screen`) ran short windows and only rank configurations; the winner comes "
              "from `final` rows. Rows of an aborted attempt (orchestrator killed) are kept but never counted.", "",
              "| config | phase | concurrency | throughput (tok/s) | goodput (tok/s) | TTFT P50 (s) | TTFT P99 (s) | "
              "TPOT P50 (ms) | TPOT P99 (ms) | cache hit | preemptions | KV max | queue mean | SLA |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    aborted = {c["id"] for c in ctx["configs"] if c["status"] == "aborted"}
    for r in sorted(ctx["runs"], key=lambda r: (r["server_config_id"], r["concurrency"])):
        phase = (r.get("phase") or "final") + (" (aborted attempt)" if r["server_config_id"] in aborted else "")
        if r["status"] != "completed":
            lines.append(f"| {ctx['labels'].get(r['server_config_id'])} | {phase} | {r['concurrency']} | "
                         f"{r['status']}: {r.get('reason') or ''} |" + " |" * 10)
            continue
        lines.append(
            f"| {ctx['labels'].get(r['server_config_id'])} | {phase} | {r['concurrency']} | {_fmt(r['output_tps'])} | "
            f"{_fmt(r['goodput_tps'])} | {_fmt(r['ttft_p50_ms'], 2, 1e-3)} | {_fmt(r['ttft_p99_ms'], 2, 1e-3)} | "
            f"{_fmt(r['tpot_p50_ms'], 1)} | {_fmt(r['tpot_p99_ms'], 1)} | {_fmt(r['cache_hit_rate'], 0, 100)}% | "
            f"{_fmt(r['retractions'])} | {_fmt(r['kv_usage_max'], 2)} | {_fmt(r['queue_len_mean'], 1)} | "
            f"{'pass' if r['passes_sla'] else 'fail: ' + (r.get('sla_failures') or '')} |")
    lines += ["", "## Configurations", "",
              "| config | status | phase | knee concurrency | knee goodput (tok/s) | 95% CI | why the ladder stopped |",
              "|---|---|---|---|---|---|---|"]
    for c in ctx["configs"]:
        knee = ctx["knees"].get(c["id"])
        lines.append(f"| {ctx['labels'].get(c['id'])} | {c['status']} | {knee['phase'] if knee else '—'} | "
                     f"{knee['concurrency'] if knee else '—'} | {_fmt(knee['goodput_tps']) if knee else '—'} | "
                     f"{_ci(knee) if knee else '—'} | {c.get('stop_reason') or c.get('failure_reason') or ''} |")
    lines += [""]
    if missing:
        lines += ["## No conclusion", "", "The report contract is not met; missing: " + ", ".join(missing) + ".",
                  "A report missing any of these fields may not name a winner.", ""]
    winner = ctx.get("winner")
    if winner and not missing:
        lines += ["## Winner", "",
                  f"**{ctx['labels'].get(winner['id'])}**: knee at concurrency {winner['knee']['concurrency']}, "
                  f"goodput {_fmt(winner['knee']['goodput_tps'])} output tok/s inside the SLA (95% CI "
                  f"{_ci(winner['knee'])}, knee re-chosen in every bootstrap resample)"
                  + (" (simulated)." if study.get("simulated") else "."), ""]
        if winner.get("screen_only"):
            lines += ["> Screening only: no final (long-window) ladder ran, so this winner rests on short windows.", ""]
        lines += ["```",
                  launch_command(env.get("model_path") or "MODEL", winner["knobs"], profile.get("server", {}).get("extra_args", [])),
                  "```", ""]
    elif winner is None:
        lines += ["## Winner", "", "No configuration passed the SLA at any step: every configuration is infeasible.", ""]
    lines += soak_lines(ctx)
    from sweep.report_crosscheck import crosscheck_lines

    lines += crosscheck_lines(ctx)
    from sweep.report_html import history_plot, write_html

    plots = _plots(ctx, out_dir)
    hist = history_plot(ctx, out_dir)
    plots += [hist] if hist else []
    for p in plots:
        lines.append(f"![{p.stem}]({p.name})")
    md = out_dir / "report.md"
    md.write_text("\n".join(lines) + "\n")
    html = write_html(lines, plots, out_dir / "report.html", simulated=bool(study.get("simulated")))
    return ReportFiles(md, plots, missing, html)


COMPARE_METRICS = (("output_tps", "throughput (tok/s)", 0, 1.0), ("goodput_tps", "goodput (tok/s)", 0, 1.0),
                   ("ttft_p50_ms", "TTFT P50 (s)", 2, 1e-3), ("ttft_p99_ms", "TTFT P99 (s)", 2, 1e-3),
                   ("tpot_p50_ms", "TPOT P50 (ms)", 1, 1.0), ("tpot_p99_ms", "TPOT P99 (ms)", 1, 1.0),
                   ("cache_hit_rate", "cache hit", 2, 1.0), ("retractions", "preemptions", 0, 1.0),
                   ("passes_sla", "SLA pass", 0, 1.0))
KNOB_COLS = ("max_running_requests", "mem_fraction_static", "chunked_prefill_size", "schedule_policy")


def _side_steps(side: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """Per concurrency, the step a side contributes: a run's own, or a study's winner's ladder."""
    if side["kind"] == "run":
        return {side["run"]["concurrency"]: side["run"]}
    ctx = side["ctx"]
    win = ctx.get("winner")
    if not win:
        return {}
    return {r["concurrency"]: r for r in ctx["runs"] if r["server_config_id"] == win["id"] and r["status"] == "completed"}


def _side_knobs(side: dict[str, Any]) -> dict[str, Any]:
    if side["kind"] == "run":
        return {k: side["run"].get(k) for k in KNOB_COLS}
    win = side["ctx"].get("winner") or {}
    return {k: (win.get("knobs") or {}).get(k) for k in KNOB_COLS}


def compare_markdown(a: dict[str, Any], b: dict[str, Any], forced: bool = False) -> str:
    """Two runs or two studies (their winners) side by side: knobs, per-step metrics and knees."""
    lines = [f"# Compare: {a['name']} vs {b['name']}", ""]
    if forced:
        lines += [f"> **WARNING: different workloads** (fingerprint {a['fingerprint']} vs {b['fingerprint']}); "
                  "these numbers are not comparable.", ""]
    else:
        lines += [f"Same workload fingerprint `{a['fingerprint']}`.", ""]
    sim = [s["name"] for s in (a, b) if (s.get("run") or s.get("ctx", {}).get("study") or {}).get("simulated")]
    if sim:
        lines += [f"> SIMULATED: {', '.join(sim)}", ""]
    ka, kb = _side_knobs(a), _side_knobs(b)
    lines += ["## Knobs", "", f"| knob | {a['name']} | {b['name']} |", "|---|---|---|"]
    lines += [f"| {k} | {_fmt_any(ka[k])} | {_fmt_any(kb[k])} |" for k in KNOB_COLS]
    if a["kind"] == "study" and b["kind"] == "study":
        lines += ["", "## Knees", "", f"| | {a['name']} | {b['name']} |", "|---|---|---|"]
        wa, wb = a["ctx"].get("winner"), b["ctx"].get("winner")
        for label, f in (("knee concurrency", lambda w: w["knee"]["concurrency"]),
                         ("knee goodput (tok/s)", lambda w: _fmt(w["knee"]["goodput_tps"])),
                         ("95% CI", lambda w: _ci(w["knee"])),
                         ("configurations", None)):
            if f is None:
                lines.append(f"| {label} | {len(a['ctx']['configs'])} | {len(b['ctx']['configs'])} |")
            else:
                lines.append(f"| {label} | {f(wa) if wa else '—'} | {f(wb) if wb else '—'} |")
    sa, sb = _side_steps(a), _side_steps(b)
    lines += ["", "## Per step", "", "| concurrency | metric | " + f"{a['name']} | {b['name']} | B − A |",
              "|---|---|---|---|---|"]
    for c in sorted(set(sa) | set(sb)):
        for col, label, nd, scale in COMPARE_METRICS:
            va, vb = (sa.get(c) or {}).get(col), (sb.get(c) or {}).get(col)
            diff = (_fmt((vb - va), nd, scale) if isinstance(va, int | float) and isinstance(vb, int | float)
                    and not isinstance(va, bool) else "")
            lines.append(f"| {c} | {label} | {_fmt(va, nd, scale)} | {_fmt(vb, nd, scale)} | {diff} |")
    return "\n".join(lines) + "\n"


def _fmt_any(v: Any) -> str:
    return "—" if v is None else str(v)
