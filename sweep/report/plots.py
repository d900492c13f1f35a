"""The report's plots: ladder.png (nine panels against client concurrency, or the offered rate in req/s of an
open-loop rate ladder) and pareto.png (goodput against TTFT for every step).

- One legend per figure, outside the axes (to the right), so it never covers data.
- Up to 30 configurations stay distinct: 30 different colours (PALETTE), and a marker per ten (circle, square,
  triangle); a screening ladder is dashed, a final one solid.
- The SLA bounds are drawn (TTFT and TPOT at the SLA's own percentiles, black dashed) where a panel has one.
- ladder.png marks every configuration's knee (a diamond in its colour) and the winner's (a gold star); with more
  than LEADERS configurations the winner and the best knees are drawn bold and the rest faded, so 20 or 30
  ladders still read (each keeps its colour and its legend entry, leaders first).
- pareto.png marks the Pareto front (no other step has more goodput at a lower TTFT) and the winner's knee.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import ScalarFormatter  # noqa: E402

from sweep.analysis.ladder_steps import ladder_phase  # noqa: E402
from sweep.analysis.loads import knee_load, load_text  # noqa: E402
from sweep.analysis.run_stats import STORED_PERCENTILES, RunStats  # noqa: E402
from sweep.core.types import JSON  # noqa: E402
from sweep.store import RunRecord  # noqa: E402
from sweep.views.study import StudyContext  # noqa: E402

Stat = Callable[[RunStats], float | int | bool | None]  # one statistic of a window (a field, so mypy checks it)

MARKERS = ("o", "s", "^")
# 30 colours, no two alike: tab10, then tab20b's darkest and middle shade of its five hues, then tab20's light
# shades (tab10 alone repeated its colours from the 11th configuration on)
PALETTE = (*map(plt.get_cmap("tab10"), range(10)), *(plt.get_cmap("tab20b")(4 * h + s) for s in (0, 2) for h in range(5)),
           *map(plt.get_cmap("tab20"), range(1, 20, 2)))
# black: tab10's red is a configuration's colour, and a bound drawn in it read as one more ladder
SLA_STYLE: dict[str, Any] = {"color": "black", "linestyle": (0, (6, 3)), "linewidth": 1.6}


LEADERS = 5  # the winner and the next best knees drawn bold; the others faded (when there are more)


def leaders(ctx: StudyContext, ids: list[int]) -> list[int]:
    """The configurations drawn bold: every one when there are at most LEADERS, else the winner first, then the
    highest knee goodput, LEADERS in all."""
    if len(ids) <= LEADERS:
        return list(ids)
    win = ctx.winner.id if ctx.winner is not None else None
    ranked = sorted((i for i in ids if i in ctx.knees and i != win), key=lambda i: -ctx.knees[i].goodput_tps)
    return ([win] if win in ids else []) + ranked[:LEADERS - (1 if win in ids else 0)]


def knee_step(ctx: StudyContext, cid: int, runs: list[RunRecord]) -> RunRecord | None:
    """The configuration's step at its knee (its knee's phase, a refine step counting as final), if drawn."""
    knee = ctx.knees.get(cid)
    if knee is None and ctx.winner is not None and ctx.winner.id == cid:
        knee = ctx.winner.knee
    if knee is None:
        return None
    at = [r for r in runs if _x(r) == knee_load(knee)]
    return next((r for r in at if ladder_phase(r.phase) == knee.phase), at[0] if at else None)


def _x(r: RunRecord) -> float:
    """A window's place on the x axis: its load (the offered rate in an open-loop rate ladder, else concurrency)."""
    return r.offered_rps if r.offered_rps is not None else float(r.concurrency)


def style(i: int) -> dict[str, Any]:
    """Colour and marker of the i-th configuration: the colours distinct for i < 30, the markers per ten."""
    return {"color": PALETTE[i % len(PALETTE)], "marker": MARKERS[(i // 10) % len(MARKERS)]}


def _sla(ctx: StudyContext) -> dict[str, JSON]:
    return ctx.raw("sla")


def _pct(sla: dict[str, JSON], key: str) -> int:
    """The SLA's percentile (`ttft_percentile`: TTFT's) where the runs table keeps it (P50, P90, P95, P99), else
    P99: a curve is always a stored column, titled by the percentile it is (a P75 drew an empty panel)."""
    v = sla.get(key)
    q = int(v) if isinstance(v, int | float) and v else 99
    return q if q in STORED_PERCENTILES else 99


def _bound(sla: dict[str, JSON], key: str) -> float | None:
    v = sla.get(key)
    return float(v) if isinstance(v, int | float) else None


def ladders(ctx: StudyContext) -> dict[int, list[RunRecord]]:
    """Completed, non-soak steps per configuration (aborted attempts left out), by concurrency."""
    aborted = {c.id for c in ctx.configs if c.status == "aborted"}
    by_cfg: dict[int, list[RunRecord]] = {}
    for r in ctx.runs:
        if r.status == "completed" and r.phase != "soak" and r.server_config_id not in aborted:
            by_cfg.setdefault(r.server_config_id, []).append(r)
    return {cid: sorted(rs, key=_x) for cid, rs in sorted(by_cfg.items())}


def _label(ctx: StudyContext, cid: int, runs: list[RunRecord]) -> str:
    tag = " (screen)" if runs[0].phase == "screen" else ""
    return ctx.labels.get(cid, str(cid)) + tag


def _title(ctx: StudyContext, text: str) -> str:
    return text + ("  [SIMULATED]" if ctx.study.simulated else "")


def _value(r: RunRecord, stat: Stat) -> float | None:
    """One statistic of a window as a float (None: unset, or no statistics stored)."""
    v = stat(r.stats) if r.stats is not None else None
    return None if v is None else float(v)


def _goodput(r: RunRecord) -> float:
    """A window's goodput (output tok/s), 0 where it stored none."""
    return (r.stats and r.stats.goodput_tps) or 0.0


def _log_when_wide(values: list[float]) -> bool:
    """Latencies past the knee run 100x those before it: a linear axis flattens every passing step onto zero."""
    pos = [v for v in values if v == v and v > 0]
    return bool(pos) and max(pos) > 20 * min(pos)


def ladder_figure(ctx: StudyContext) -> Figure | None:
    by_cfg = ladders(ctx)
    if not by_cfg:
        return None
    sla = _sla(ctx)
    pt, pp = _pct(sla, "ttft_percentile"), _pct(sla, "tpot_percentile")
    panels: list[tuple[Stat, str, float, float | None]] = [
        (lambda s: s.output_tps, "throughput (output tok/s)", 1.0, None),
        (lambda s: s.goodput_tps, "goodput (output tok/s)", 1.0, None),
        (lambda s: s.percentile_ms("ttft", pt), f"TTFT P{pt} (ms)", 1.0, _bound(sla, "ttft_ms")),
        (lambda s: s.percentile_ms("tpot", pp), f"TPOT P{pp} (ms)", 1.0, _bound(sla, "tpot_ms")),
        (lambda s: s.cache_hit_rate, "cache hit rate", 1.0, None), (lambda s: s.retractions, "retractions", 1.0, None),
        (lambda s: s.kv_usage_max, "KV usage max", 1.0, None), (lambda s: s.queue_len_mean, "queue length mean", 1.0, None),
        (lambda s: s.peak_gpu_mem_mib, "peak GPU memory (GiB)", 1 / 1024, None)]
    fig, axes = plt.subplots(3, 3, figsize=(16, 12))
    steps = sorted({_x(r) for runs in by_cfg.values() for r in runs})
    by_rate = any(r.offered_rps is not None for runs in by_cfg.values() for r in runs)
    ids = list(by_cfg)
    bold = leaders(ctx, ids)
    order = bold + [i for i in ids if i not in bold]  # leaders first: in the legend and on top
    win = ctx.winner.id if ctx.winner is not None else None
    for ax, (stat, title, scale, bound) in zip(axes.flat, panels, strict=False):
        drawn: list[float] = []
        for cid in order:
            runs, i, lead = by_cfg[cid], ids.index(cid), cid in bold
            ys = [v * scale if (v := _value(r, stat)) is not None else float("nan") for r in runs]
            drawn += ys
            label = _label(ctx, cid, runs) + (" (winner)" if cid == win else "")
            ax.plot([_x(r) for r in runs], ys, "--" if runs[0].phase == "screen" else "-", label=label,
                    markersize=5 if lead else 3, linewidth=2.2 if lead else 0.8, alpha=1.0 if lead else 0.3,
                    zorder=3 if lead else 1, **style(i))
            step = knee_step(ctx, cid, runs)
            y = _value(step, stat) if step is not None else None
            if step is not None and y is not None:  # the knee: a diamond in its colour, the winner's a gold star
                ax.scatter([_x(step)], [y * scale], marker="*" if cid == win else "D",
                           s=260 if cid == win else (45 if lead else 18), color="gold" if cid == win else style(i)["color"],
                           edgecolor="black", linewidth=0.8, alpha=1.0 if lead or cid == win else 0.4,
                           zorder=6 if cid == win else 4)
        if bound is not None:
            ax.axhline(float(bound), label="SLA bound", **SLA_STYLE)
            if _log_when_wide([*drawn, float(bound)]):
                ax.set_yscale("log")
                ax.yaxis.set_major_formatter(ScalarFormatter())  # 100, 1000: milliseconds, not powers of ten
        ax.set_xscale("log", base=2)
        ax.set_xticks(steps, [f"{c:g}" for c in steps])  # the ladder's own steps, not powers of two
        ax.minorticks_off()
        ax.set_title(title)
        ax.set_xlabel("offered rate (req/s)" if by_rate else "client concurrency")
    handles, labels = axes.flat[2].get_legend_handles_labels()  # the TTFT panel: every ladder and the bound
    from matplotlib.lines import Line2D

    handles += [Line2D([], [], marker="D", linestyle="", color="gray", markeredgecolor="black"),
                Line2D([], [], marker="*", linestyle="", markersize=14, color="gold", markeredgecolor="black")]
    labels += ["knee (each configuration)", "winner's knee"]
    fig.suptitle(_title(ctx, ctx.study.name))
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.0, 0.97), fontsize=8, frameon=False,
               ncol=1 if len(labels) <= 32 else 2)
    return fig


def pareto_front(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """(TTFT, goodput) points no other point beats on both (lower TTFT, higher goodput), by TTFT."""
    front: list[tuple[float, float]] = []
    for x, y in sorted(points, key=lambda p: (p[0], -p[1])):
        if not front or y > front[-1][1]:
            front.append((x, y))
    return front


def pareto_figure(ctx: StudyContext) -> Figure | None:
    by_cfg = ladders(ctx)
    if not by_cfg:
        return None
    sla = _sla(ctx)
    pt = _pct(sla, "ttft_percentile")
    ttft: Stat = lambda s: s.percentile_ms("ttft", pt)  # noqa: E731 - one name for the axis and the winner's star
    fig, ax = plt.subplots(figsize=(9, 5.5))
    points: list[tuple[float, float]] = []
    for i, (cid, runs) in enumerate(by_cfg.items()):
        xy = [(x, _goodput(r)) for r in runs if (x := _value(r, ttft)) is not None]
        points += xy
        st = style(i)
        ax.scatter([x for x, _ in xy], [y for _, y in xy], color=st["color"], marker=st["marker"], s=30,
                   label=_label(ctx, cid, runs))
    front = pareto_front(points)
    if front:
        ax.plot([x for x, _ in front], [y for _, y in front], "-", color="#555555", linewidth=2.5, alpha=0.6,
                drawstyle="steps-post", label="Pareto front", zorder=1)
    ttft_bound = _bound(sla, "ttft_ms")
    if ttft_bound is not None:
        ax.axvline(ttft_bound, label=f"SLA TTFT P{pt} bound", **SLA_STYLE)
    win = ctx.winner
    if win is not None:
        step = next((r for r in by_cfg.get(win.id, []) if _x(r) == knee_load(win.knee)), None)
        x = _value(step, ttft) if step is not None else None
        if step is not None and x is not None:
            ax.scatter([x], [_goodput(step)], marker="*", s=320, facecolor="gold",
                       edgecolor="black", zorder=5, label=f"winner: {ctx.labels.get(win.id, '')} "
                                                          f"{load_text(step.concurrency, step.offered_rps)}")
    if _log_when_wide([x for x, _ in points]):
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.set_xlabel(f"TTFT P{pt} (ms)")
    ax.set_ylabel("goodput (output tok/s)")
    ax.set_title(_title(ctx, f"goodput vs TTFT P{pt} (every step)"))
    fig.tight_layout()
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, frameon=False)
    return fig


def plots(ctx: StudyContext, out_dir: Path) -> list[Path]:
    """Write ladder.png and pareto.png (nothing without a completed step); legends outside, never on data."""
    out: list[Path] = []
    for name, make in (("ladder.png", ladder_figure), ("pareto.png", pareto_figure)):
        fig = make(ctx)
        if fig is None:
            continue
        path = out_dir / name
        fig.savefig(path, dpi=90, bbox_inches="tight")
        plt.close(fig)
        out.append(path)
    return out
