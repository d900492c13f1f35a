"""`sweep show STUDY`: a study's status and its winner per SLA tier, read from study_winners (the one stored fact
the report and the live page name, written when the study ended)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from sweep.core.errors import NotFound
from sweep.core.types import JSONOut
from sweep.store import Store, WinnerRecord

if TYPE_CHECKING:
    from sweep.report.document import CompareSide


def interval(w: WinnerRecord) -> str:
    """The winner's goodput interval in goodput's unit, e.g. "5410–5518 tok/s" ('' when none)."""
    if w.goodput_ci_low is None or w.goodput_ci_high is None:
        return ""
    return f"{w.goodput_ci_low:,.0f}–{w.goodput_ci_high:,.0f} tok/s"


def show_study(store: Store, name: str, db: str, fmt: str) -> None:
    """Print one study and its stored winners as a table or the `show` JSON document (kind study)."""
    study = store.get_study_by_name(name)
    if study is None:
        raise NotFound(f"no run or study named {name} in {db}")
    winners = store.study_winners(study.id)
    if fmt == "json":
        from sweep.cli.jsonout import emit

        head = {k: v for k, v in study.columns().items() if k != "profile_json"}
        emit("show", {"study": head, "winners": [winner_dict(w) for w in winners]})
        return
    con = Console(soft_wrap=True)
    con.print(f"study {study.name}: {study.status}" + (" [SIMULATED]" if study.simulated else ""), highlight=False)
    if not winners:
        con.print("no winner stored: the study has not ended", highlight=False)
    for w in winners:
        tier = f"tier {w.tier}" + (", primary" if w.is_primary else "")
        if w.server_config_id is None:
            con.print(f"no winner ({tier}): {w.why or ''}", highlight=False, markup=False)
            continue
        ci = interval(w)
        con.print(f"winner ({tier}): {w.label} (config {w.server_config_id})\n"
                  f"  knee: c={w.concurrency}, goodput {w.goodput_tps or 0:,.0f} output tok/s"
                  + (f" (95% interval {ci})" if ci else "") + f", {w.phase} ladder"
                  + (f"\n  why: {w.why}" if w.why else ""), highlight=False, markup=False)

def winner_dict(w: WinnerRecord) -> dict[str, JSONOut]:
    """A stored winner as the JSON documents show it: its columns, the knobs as an object."""
    return {**{k: v for k, v in w.columns().items() if k not in ("knobs_json", "study_id")}, "knobs": w.knobs()}


def compare_payload(store: Store, sides: tuple[CompareSide, CompareSide], forced: bool,
                    markdown: str) -> dict[str, JSONOut]:
    """`sweep compare --format json`: each side (a run's row, or a study's stored winners) and the markdown."""
    out = []
    for side in sides:
        item: dict[str, JSONOut] = {"ref": side.name, "fingerprint": side.fingerprint}
        if side.run is not None:
            item |= {"kind": "run", "run": side.run.columns()}
        elif side.ctx is not None:
            item |= {"kind": "study", "study": side.ctx.study.name,
                     "winners": [winner_dict(w) for w in store.study_winners(side.ctx.study.id)]}
        out.append(item)
    return {"forced": forced, "sides": out, "markdown": markdown}
