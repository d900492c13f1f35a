"""Where a study worker measures: its host and GPU group (a Placement), and hardware groups for reports.

Numbers measured on different GPU models are not comparable: a report ranks configurations within one
hardware group (GPU model and memory) and refuses to rank across groups unless told to.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from sweep.analysis.knee import ConfigKnee
from sweep.core.types import Placement, ServerConfig


class Launched(Protocol):
    """A configuration as it was launched (a stored server_configs record): its id, knobs and placement."""

    @property
    def id(self) -> int: ...

    @property
    def config(self) -> ServerConfig: ...

    @property
    def placement(self) -> Placement: ...


L = TypeVar("L", bound=Launched)


def hardware_key(where: Placement) -> str:
    """A run's or configuration's hardware group: GPU model and memory (unknown for rows before workers)."""
    name = where.gpu_name
    if not name:
        return "unrecorded hardware"
    mem = where.gpu_memory_mib
    return f"{name}, {mem / 1024:.0f} GiB" if mem else str(name)


def hardware_groups(rows: Iterable[L]) -> dict[str, list[L]]:
    """Configurations grouped by hardware_key, groups in first-seen order."""
    out: dict[str, list[L]] = {}
    for r in rows:
        out.setdefault(hardware_key(r.placement), []).append(r)
    return out


def mixed_hardware_reason(rows: Iterable[Launched]) -> str | None:
    """Why configurations of these rows cannot be ranked together, or None when they share one GPU model."""
    groups = [k for k in hardware_groups(rows) if k != "unrecorded hardware"]
    if len(groups) <= 1:
        return None
    return (f"measured on {len(groups)} GPU models ({'; '.join(groups)}): a knee on one is not comparable "
            "with a knee on another, so each group is ranked on its own")


@dataclass(frozen=True)
class Winner:
    """A study's (or a hardware group's) winning configuration: its id, knobs and knee."""

    id: int  # server_configs.id
    config: ServerConfig
    knee: ConfigKnee
    screen_only: bool  # no final ladder ran: the winner rests on screening windows


def pick_winner(configs: Sequence[Launched], knees: Mapping[int, ConfigKnee],
                eligible: Callable[[int], bool] = lambda _: True) -> tuple[Winner | None, dict[int, ConfigKnee]]:
    """(winner, pool): the highest knee goodput among the eligible final ladders (or screens when no final ran)."""
    finals = {i: k for i, k in knees.items() if k.phase == "final"}
    pool = {i: k for i, k in (finals or dict(knees)).items() if eligible(i)}
    if not pool:
        return None, pool
    cid = max(pool, key=lambda i: pool[i].goodput_tps)
    c = next(c for c in configs if c.id == cid)
    return Winner(cid, c.config, pool[cid], not finals), pool


@dataclass(frozen=True)
class HardwareRanking:
    """How a study's configurations are ranked given the GPUs they ran on."""

    reason: str | None  # why they are not ranked together (None: one GPU model, or ranked anyway)
    winners: dict[str, Winner | None]  # hardware group -> the knee winner within it
    mixed: bool  # measured on more than one GPU model
    ranked_anyway: bool  # mixed, and the caller asked for one ranking regardless


def rank_by_hardware(configs: Sequence[Launched], knees: Mapping[int, ConfigKnee],
                     rank_mixed: bool = False, eligible: Callable[[int], bool] = lambda _: True) -> HardwareRanking:
    """Each hardware group's own winner; across groups only when `rank_mixed` (their knees are not comparable)."""
    measured = [c for c in configs if c.id in knees]
    groups = hardware_groups(measured)
    winners = {key: pick_winner(rows, {c.id: knees[c.id] for c in rows}, eligible)[0]
               for key, rows in groups.items()}
    reason = mixed_hardware_reason(measured)
    return HardwareRanking(None if rank_mixed else reason, winners, reason is not None,
                           rank_mixed and reason is not None)


def hardware_lines(ranking: HardwareRanking | None, labels: Mapping[int, str]) -> list[str]:
    """The report's section on a study measured on several GPU models (nothing for one model)."""
    if ranking is None or not ranking.mixed:
        return []
    out = ["## Hardware groups", ""]
    if ranking.ranked_anyway:
        out += ["> Ranked across GPU models because this report was asked to (--rank-mixed-hardware): a knee on "
                "one GPU model is not comparable with a knee on another.", ""]
    else:
        out += [f"No single winner: {ranking.reason}. Rewrite with `sweep report STUDY --rank-mixed-hardware` "
                "to rank them together anyway.", ""]
    out += ["| hardware | winner | knee concurrency | knee goodput (tok/s) |", "|---|---|---|---|"]
    for key, w in ranking.winners.items():
        if w is None:
            out.append(f"| {key} | no configuration passed the SLA | — | — |")
        else:
            out.append(f"| {key} | {labels.get(w.id)} | {w.knee.concurrency} | {w.knee.goodput_tps:.0f} |")
    return out + [""]
