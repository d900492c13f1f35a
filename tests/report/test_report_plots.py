"""The report's plots on a 30-configuration study: legends outside the axes, 30 distinct styles, SLA bounds,
the Pareto front and the winner marked. Checked on the matplotlib figures themselves (artists and extents)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import to_hex

from sweep.analysis.knee import ConfigKnee
from sweep.analysis.winner import Winner
from sweep.core.types import JSON, ServerConfig
from sweep.report.plots import ladder_figure, pareto_figure, pareto_front, plots
from sweep.store import ConfigRecord, RunRecord, StudyRecord
from sweep.views.study import StudyContext

SLA: dict[str, JSON] = {"ttft_ms": 1000.0, "tpot_ms": 100.0, "ttft_percentile": 95, "tpot_percentile": 95}
LADDER = [16, 32, 64, 128]


def study(n: int = 30) -> StudyContext:
    configs: list[ConfigRecord] = []
    runs: list[RunRecord] = []
    for cid in range(1, n + 1):
        configs.append(ConfigRecord(cid, status="completed"))
        for j, c in enumerate(LADDER):
            runs.append(RunRecord.from_row({"id": len(runs) + 1, "server_config_id": cid, "status": "completed", "phase": "final", "concurrency": c,
                         "output_tps": 100.0 * c + cid, "goodput_tps": 90.0 * c + 3 * cid - 20 * j * j,
                         "ttft_p95_ms": 200.0 * (j + 1) + cid, "tpot_p95_ms": 20.0 * (j + 1), "cache_hit_rate": 0.5,
                         "retractions": 0, "kv_usage_max": 0.5, "queue_len_mean": 1.0, "peak_gpu_mem_mib": 1024.0}))
    knee = ConfigKnee(64, 5800.0, 58.0, None, None, "final", "test")
    return StudyContext(configs=configs, runs=runs, labels={cid: f"mrr={cid * 8}" for cid in range(1, n + 1)},
                        study=StudyRecord(1, "thirty", simulated=True), profile_raw={"sla": SLA},
                        winner=Winner(30, ServerConfig(max_running_requests=240), knee, False))


def _overlap(a: Any, b: Any) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_the_ladder_legend_sits_outside_every_panel_and_30_configurations_look_different() -> None:
    fig = ladder_figure(study())
    assert fig is not None
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    legend = fig.legends[0].get_window_extent(renderer)
    assert all(not ax.get_legend() for ax in fig.axes)  # no legend inside a panel
    assert not any(_overlap(legend, ax.get_window_extent(renderer)) for ax in fig.axes)
    ttft = fig.axes[2]
    lines = [ln for ln in ttft.get_lines() if str(ln.get_label()).startswith("mrr=")]
    assert len(lines) == 30
    colours = {to_hex(ln.get_color()) for ln in lines}
    assert len(colours) == 30  # colours, not only colour x marker: tab10 repeated its ten from the 11th on
    bound = [ln for ln in ttft.get_lines() if ln.get_label() == "SLA bound"]
    assert to_hex(bound[0].get_color()) not in colours  # the bound is not read as one more ladder
    assert bound and set(bound[0].get_ydata()) == {1000.0}  # type: ignore[arg-type]
    assert ttft.get_title() == "TTFT P95 (ms)"  # the SLA's own percentile, not P99
    assert [ln.get_label() for ln in fig.axes[3].get_lines() if ln.get_label() == "SLA bound"]
    plt.close(fig)


def test_the_pareto_plot_marks_the_front_the_winner_and_the_bound() -> None:
    fig = pareto_figure(study())
    assert fig is not None
    ax = fig.axes[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    legend = ax.get_legend()
    assert legend is not None
    assert not _overlap(legend.get_window_extent(renderer), ax.get_window_extent(renderer))
    labels = [str(h.get_label()) for h in legend.legend_handles if h is not None]
    assert "Pareto front" in labels and "SLA TTFT P95 bound" in labels
    assert any(lbl.startswith("winner: mrr=240 c=64") for lbl in labels)
    front = next(ln for ln in ax.get_lines() if ln.get_label() == "Pareto front")
    assert len(front.get_xdata()) >= 2  # type: ignore[arg-type]
    plt.close(fig)


def test_an_sla_percentile_the_runs_table_does_not_keep_plots_its_p99_not_an_empty_panel() -> None:
    """ttft_percentile 75: no runs column is ttft_p75_ms; the plots draw the P99 and say so (they drew nothing)."""
    ctx = study(3)
    runs = [replace(r, stats=replace(r.stats, ttft_p99_ms=2 * (r.stats.ttft_p95_ms or 0.0))) for r in ctx.runs
            if r.stats is not None]
    ctx = replace(ctx, runs=runs, profile_raw={"sla": {**SLA, "ttft_percentile": 75}})
    ladder = ladder_figure(ctx)
    assert ladder is not None
    ttft = ladder.axes[2]
    assert ttft.get_title() == "TTFT P99 (ms)"
    drawn = np.concatenate([np.asarray(ln.get_ydata(), dtype=float) for ln in ttft.get_lines()
                            if str(ln.get_label()).startswith("mrr=")])
    assert drawn.size == 3 * len(LADDER) and not np.isnan(drawn).any()
    pareto = pareto_figure(ctx)
    assert pareto is not None
    points = [np.asarray(c.get_offsets(), dtype=float) for c in pareto.axes[0].collections]
    assert sum(p.shape[0] for p in points) >= 3 * len(LADDER)
    plt.close(ladder)
    plt.close(pareto)


def test_pareto_front_keeps_only_points_nothing_beats() -> None:
    pts = [(100.0, 5.0), (200.0, 4.0), (150.0, 9.0), (300.0, 12.0), (250.0, 8.0)]
    assert pareto_front(pts) == [(100.0, 5.0), (150.0, 9.0), (300.0, 12.0)]


def test_plots_writes_both_files(tmp_path: Path) -> None:
    files = plots(study(3), tmp_path)
    assert [f.name for f in files] == ["ladder.png", "pareto.png"] and all(f.stat().st_size > 5000 for f in files)


def test_latencies_a_hundredfold_apart_get_a_log_axis_so_passing_steps_are_not_flattened_onto_zero() -> None:
    ctx = study(4)
    # the top step fails at 10 s TTFT, the others pass near 100 ms (the interactive profile's)
    def slowed(r: RunRecord) -> RunRecord:
        assert r.stats is not None  # every step of study() stores its statistics
        return replace(r, stats=replace(r.stats, ttft_p95_ms=10_000.0 if r.concurrency == 128 else 80.0 + r.concurrency))

    ctx = replace(ctx, runs=[slowed(r) for r in ctx.runs])
    ladder, pareto = ladder_figure(ctx), pareto_figure(ctx)
    assert ladder is not None and pareto is not None
    assert ladder.axes[2].get_yscale() == "log" and pareto.axes[0].get_xscale() == "log"
    assert ladder.axes[3].get_yscale() == "linear"  # TPOT 20..80 ms against its 100 ms bound: linear
    plt.close(ladder)
    plt.close(pareto)


def test_the_history_covers_every_phase_and_its_legend_sits_outside() -> None:
    """Every window of the study in measured order, screening to soak (it stopped at screening when it drew Optuna's
    trials); failed windows at zero, bottom left, where matplotlib's 'best' legend went."""
    from sweep.report.html import history_figure

    ctx = study(3)
    phases = ["screen", "screen", "final", "final", "refine", "soak"]
    runs = [replace(r, phase=phases[n % len(phases)]) for n, r in enumerate(ctx.runs)]
    runs.append(RunRecord.from_row({"id": 99, "server_config_id": 1, "status": "failed", "phase": "final",
                                    "concurrency": 256}))
    ctx = replace(ctx, runs=runs, knees={1: ConfigKnee(64, 5000.0, 50.0, None, None, "final", "t"),
                                         3: ConfigKnee(64, 5800.0, 58.0, None, None, "final", "t")},
                  winner=Winner(3, ServerConfig(max_running_requests=24), ConfigKnee(64, 5800.0, 58.0, None, None, "final", "t"), False))
    fig = history_figure(ctx)
    assert fig is not None
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    ax = fig.axes[0]
    legend = ax.get_legend()
    assert legend is not None and not _overlap(legend.get_window_extent(renderer), ax.get_window_extent(renderer))
    labels = [t.get_text() for t in legend.get_texts()]
    for phase in ("screen", "final", "refine", "soak"):
        assert f"{phase} window" in labels
    assert "failed / aborted window" in labels and "best knee so far" in labels
    assert any(t.startswith("winner's knee") for t in labels)
    plt.close(fig)


def test_twenty_configurations_mark_each_knee_and_fade_all_but_the_leaders() -> None:
    ctx = study(20)
    knees = {cid: ConfigKnee(64, 5000.0 + cid, 50.0, None, None, "final", "t") for cid in range(1, 21)}
    ctx = replace(ctx, knees=knees, winner=Winner(7, ServerConfig(max_running_requests=56), knees[7], False))
    fig = ladder_figure(ctx)
    assert fig is not None
    goodput = fig.axes[1]
    lines = [ln for ln in goodput.get_lines() if str(ln.get_label()).startswith("mrr=")]
    assert len(lines) == 20
    bold = [ln for ln in lines if (ln.get_alpha() or 1.0) == 1.0]
    assert len(bold) == 5 and str(bold[0].get_label()) == "mrr=56 (winner)"  # the winner, then the best knees
    assert {str(ln.get_label()) for ln in bold[1:]} == {f"mrr={c * 8}" for c in (20, 19, 18, 17)}
    marks = goodput.collections  # one knee mark per configuration, the winner's a star at its knee
    assert len(marks) == 20
    winner_mark = (64.0, 90.0 * 64 + 3 * 7 - 20 * 4)
    assert any(tuple(np.asarray(m.get_offsets())[0]) == winner_mark and m.get_sizes()[0] > 200  # type: ignore[attr-defined]
               for m in marks)
    labels = fig.legends[0].get_texts()
    assert {"knee (each configuration)", "winner's knee"} <= {t.get_text() for t in labels}
    plt.close(fig)
