"""history.png of `sweep history --plot FILE`: a workload's knee goodput study after study (95% interval as error
bars), one colour per SGLang version and one marker per GPU and host, regressions ringed in red: a drop after an
upgrade or on another host shows at a glance."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from sweep.report.plots import MARKERS, PALETTE  # noqa: E402
from sweep.views.history import History  # noqa: E402

HOST_MARKERS = (*MARKERS, "D", "v", "P", "X", "h")


def trend_figure(history: History) -> Figure | None:
    """The figure; None when no study of the workload names a winner."""
    pts = [(i, p, p.goodput_tps) for i, p in enumerate(history.points) if p.goodput_tps is not None]
    if not pts:
        return None
    versions = list(dict.fromkeys(p.sglang_version or "unrecorded" for _, p, _ in pts))
    places = list(dict.fromkeys(f"{p.gpu_name or '?'} @ {p.host or '?'}" for _, p, _ in pts))
    fig, ax = plt.subplots(figsize=(max(7.0, 0.6 * len(history.points) + 4), 4.8))
    ax.plot([i for i, _, _ in pts], [g for _, _, g in pts], "-", color="#bbbbbb", zorder=1)
    seen: set[tuple[str, str]] = set()
    for i, p, g in pts:
        version, place = p.sglang_version or "unrecorded", f"{p.gpu_name or '?'} @ {p.host or '?'}"
        lo = g - p.goodput_ci_low if p.goodput_ci_low is not None else 0.0
        hi = p.goodput_ci_high - g if p.goodput_ci_high is not None else 0.0
        label = f"SGLang {version}, {place}" if (version, place) not in seen else None
        seen.add((version, place))
        ax.errorbar([i], [g], yerr=[[lo], [hi]], fmt=HOST_MARKERS[places.index(place) % len(HOST_MARKERS)],
                    color=PALETTE[versions.index(version) % len(PALETTE)], markersize=8, capsize=4, label=label,
                    zorder=3)
        if p.regression:
            ax.scatter([i], [g], s=420, facecolor="none", edgecolor="red", linewidth=2, zorder=4,
                       label="regression" if "regression" not in ax.get_legend_handles_labels()[1] else None)
    ax.set_xticks(range(len(history.points)),
                  [f"{p.study}\n{p.created_at:%Y-%m-%d}" if p.created_at else p.study for p in history.points],
                  rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("knee goodput (output tok/s, 95% interval)")
    sim = " [SIMULATED]" if any(p.simulated for p in history.points) else ""
    ax.set_title(f"history of workload {history.fingerprint[:12]}"
                 + (f" (profile {history.profile})" if history.profile else "") + sim)
    ax.set_ylim(bottom=0)
    fig.tight_layout()
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    return fig


def write_trend(history: History, path: Path) -> Path | None:
    """Write the figure to `path` (its folder made); None when there is nothing to draw."""
    fig = trend_figure(history)
    if fig is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)
    return path
