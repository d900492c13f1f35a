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
    for r in ctx["runs"]:
        if r["status"] == "completed":
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
            ax.plot(xs, ys, marker="o", label=ctx["labels"].get(cid, str(cid)))
        ax.set_xscale("log", base=2)
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
              "| config | concurrency | throughput (tok/s) | goodput (tok/s) | TTFT P50 (s) | TTFT P99 (s) | "
              "TPOT P50 (ms) | TPOT P99 (ms) | cache hit | preemptions | KV max | queue mean | SLA |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(ctx["runs"], key=lambda r: (r["server_config_id"], r["concurrency"])):
        if r["status"] != "completed":
            lines.append(f"| {ctx['labels'].get(r['server_config_id'])} | {r['concurrency']} | "
                         f"{r['status']}: {r.get('reason') or ''} |" + " |" * 10)
            continue
        lines.append(
            f"| {ctx['labels'].get(r['server_config_id'])} | {r['concurrency']} | {_fmt(r['output_tps'])} | "
            f"{_fmt(r['goodput_tps'])} | {_fmt(r['ttft_p50_ms'], 2, 1e-3)} | {_fmt(r['ttft_p99_ms'], 2, 1e-3)} | "
            f"{_fmt(r['tpot_p50_ms'], 1)} | {_fmt(r['tpot_p99_ms'], 1)} | {_fmt(r['cache_hit_rate'], 0, 100)}% | "
            f"{_fmt(r['retractions'])} | {_fmt(r['kv_usage_max'], 2)} | {_fmt(r['queue_len_mean'], 1)} | "
            f"{'pass' if r['passes_sla'] else 'fail: ' + (r.get('sla_failures') or '')} |")
    lines += ["", "## Configurations", "", "| config | status | knee concurrency | knee goodput (tok/s) | why the ladder stopped |",
              "|---|---|---|---|---|"]
    for c in ctx["configs"]:
        knee = ctx["knees"].get(c["id"])
        lines.append(f"| {ctx['labels'].get(c['id'])} | {c['status']} | {knee['concurrency'] if knee else '—'} | "
                     f"{_fmt(knee['goodput_tps']) if knee else '—'} | {c.get('stop_reason') or c.get('failure_reason') or ''} |")
    lines += [""]
    if missing:
        lines += ["## No conclusion", "", "The report contract is not met; missing: " + ", ".join(missing) + ".",
                  "A report missing any of these fields may not name a winner.", ""]
    winner = ctx.get("winner")
    if winner and not missing:
        lines += ["## Winner", "",
                  f"**{ctx['labels'].get(winner['id'])}**: knee at concurrency {winner['knee']['concurrency']}, "
                  f"goodput {_fmt(winner['knee']['goodput_tps'])} output tok/s inside the SLA"
                  + (" (simulated)." if study.get("simulated") else "."), "", "```",
                  launch_command(env.get("model_path") or "MODEL", winner["knobs"], profile.get("server", {}).get("extra_args", [])),
                  "```", ""]
    elif winner is None:
        lines += ["## Winner", "", "No configuration passed the SLA at any step: every configuration is infeasible.", ""]
    plots = _plots(ctx, out_dir)
    for p in plots:
        lines.append(f"![{p.stem}]({p.name})")
    md = out_dir / "report.md"
    md.write_text("\n".join(lines) + "\n")
    return ReportFiles(md, plots, missing)
