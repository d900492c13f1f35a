"""The standalone HTML report (PNG plots embedded as base64) and the study-history plot."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from sweep.views.study import StudyContext  # noqa: E402

STYLE = ("body{font-family:system-ui,sans-serif;max-width:1400px;margin:2em auto;padding:0 1em;color:#222}"
         "table{border-collapse:collapse;font-size:13px;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 6px}"
         "th{background:#f3f3f3}pre{background:#f6f8fa;padding:1em;overflow-x:auto}"
         "blockquote{border-left:4px solid #e0a800;background:#fff8e1;margin:1em 0;padding:.5em 1em}"
         ".sim{background:#e0a800;color:#000;padding:.4em 1em;font-weight:bold}img{max-width:100%}")


PHASE_MARKS = (("screen", "s", "tab:blue"), ("final", "o", "tab:green"), ("refine", "^", "tab:purple"),
               ("soak", "P", "tab:orange"))


def history_figure(ctx: StudyContext) -> Figure | None:
    """The whole study in the order it was measured: every window's goodput (screening, final, refine and soak
    windows each their own marker; windows that failed or were aborted at zero, in red) and the best knee goodput
    known after each window (a configuration's knee counts once its last window is stored); None without windows.
    The legend sits outside the axes, on the right: inside, it covered the windows drawn at zero."""
    runs = sorted((r for r in ctx.runs if r.id is not None), key=lambda r: r.id)
    if not runs:
        return None
    order = {r.id: n for n, r in enumerate(runs, 1)}
    fig, ax = plt.subplots(figsize=(9, 4.5))
    ok = [r for r in runs if r.status == "completed"]
    for phase, marker, colour in PHASE_MARKS:
        pts = [r for r in ok if r.phase == phase]
        if pts:
            ax.scatter([order[r.id] for r in pts], [(r.stats and r.stats.goodput_tps) or 0.0 for r in pts], marker=marker,
                       color=colour, s=28, label=f"{phase} window")
    bad = [r for r in runs if r.status != "completed"]
    if bad:
        ax.scatter([order[r.id] for r in bad], [0.0] * len(bad), marker="x", color="red",
                   label="failed / aborted window")
    done_at = {}  # configuration -> the window after which its knee is known
    for r in runs:
        if r.phase != "soak":
            done_at[r.server_config_id] = order[r.id]
    best, xs, ys = float("-inf"), [], []
    for cid, at in sorted(done_at.items(), key=lambda kv: kv[1]):
        knee = ctx.knees.get(cid)
        if knee is not None and knee.goodput_tps > best:
            best = knee.goodput_tps
            xs.append(at)
            ys.append(best)
    if xs:
        ax.step([*xs, len(runs)], [*ys, ys[-1]], where="post", color="gray", label="best knee so far")
    win = ctx.winner
    if win is not None and win.id in done_at:
        ax.scatter([done_at[win.id]], [win.knee.goodput_tps], marker="*", s=260, color="gold", edgecolor="black",
                   zorder=5, label=f"winner's knee: {ctx.labels.get(win.id, win.id)}")
    ax.set_xlabel("window, in the order measured")
    ax.set_ylabel("goodput (output tok/s)")
    sim = " [SIMULATED]" if ctx.study.simulated else ""
    ax.set_title(f"study history: {ctx.study.name}{sim}")
    fig.tight_layout()
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    return fig


def history_plot(ctx: StudyContext, out_dir: Path) -> Path | None:
    """history.png (history_figure); None without windows."""
    fig = history_figure(ctx)
    if fig is None:
        return None
    path = out_dir / "history.png"
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)
    return path


def _inline(text: str) -> str:
    """Escape (the entities report.md writes for free text, tables.plain, read as their characters), then the
    inline markdown the reports use: **bold** and `code`."""
    out = html.escape(html.unescape(text), quote=False)
    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", out)


def _table(rows: list[str]) -> str:
    # a cell's own `|` is escaped as `\|` (report_tables.cell): split on the others only
    cells = [[c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", r.strip().strip("|"))] for r in rows]
    head, body = cells[0], [r for r in cells[2:]]
    out = ["<table><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in head) + "</tr>"]
    out += ["<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>" for r in body]
    return "\n".join(out) + "</table>"


def markdown_to_html(lines: Sequence[str], images: dict[str, str]) -> str:
    """The subset of markdown write_report emits (headings, tables, code, quotes, lists, images) as HTML."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            out.append("<pre>" + html.escape("\n".join(lines[i + 1:j])) + "</pre>")
            i = j + 1
            continue
        if line.startswith("|"):
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            out.append(_table(list(lines[i:j])))
            i = j
            continue
        m = re.match(r"!\[(.*?)\]\((.*?)\)", line)
        if m:
            src = images.get(m.group(2), m.group(2))
            out.append(f'<p><img alt="{html.escape(m.group(1))}" src="{src}"></p>')
        elif line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            out.append(f"<h{level}>{_inline(line[level:].strip())}</h{level}>")
        elif line.startswith("> "):
            out.append(f"<blockquote>{_inline(line[2:])}</blockquote>")
        elif line.startswith("- "):
            out.append(f"<ul><li>{_inline(line[2:])}</li></ul>")
        elif line.strip():
            out.append(f"<p>{_inline(line)}</p>")
        i += 1
    return "\n".join(out)


def write_html(lines: Sequence[str], plots: Sequence[Path], path: Path, simulated: bool) -> Path:
    """One self-contained file: the markdown report rendered, every PNG inlined as a data URI."""
    images = {p.name: "data:image/png;base64," + base64.b64encode(p.read_bytes()).decode() for p in plots}
    body = markdown_to_html(list(lines) + [f"![{p.stem}]({p.name})" for p in plots if p.name not in
                                           "\n".join(lines)], images)
    banner = '<div class="sim">SIMULATED: not a measurement of SGLang</div>' if simulated else ""
    title = html.escape(next((ln.lstrip("# ") for ln in lines if ln.startswith("# ")), "sweep report"))
    path.write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>"
                    f"<style>{STYLE}</style></head><body>{banner}{body}</body></html>\n")
    return path
