"""Where a study worker measures: its host and GPU group (a Placement), and hardware groups for reports.

Numbers measured on different GPU models are not comparable: a report ranks configurations within one
hardware group (GPU model and memory) and refuses to rank across groups unless told to.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sweep.analysis.knee import ConfigKnee
from sweep.core.types import Placement, ServerConfig
from sweep.launchers import procs
from sweep.profile import Profile


@dataclass(frozen=True)
class WorkerSeat:
    """What one study worker owns on its host: a label, its GPU group and the port range of its servers."""

    label: str = ""
    gpus: tuple[int, ...] | None = None  # CUDA_VISIBLE_DEVICES of its servers; None: whatever the host shows
    ports: tuple[int, int] | None = None  # [low, high) for server ports; None: any free port
    extra_env: dict[str, str] = field(default_factory=dict)

    def gpus_text(self) -> str | None:
        return None if self.gpus is None else ",".join(str(g) for g in self.gpus)


def visible_gpus(env: Mapping[str, str] | None = None) -> list[int] | None:
    """The GPU indices CUDA_VISIBLE_DEVICES names (None when unset: every GPU)."""
    raw = (env if env is not None else os.environ).get("CUDA_VISIBLE_DEVICES")
    if raw is None or not raw.strip():
        return None
    try:
        return [int(x) for x in raw.split(",") if x.strip()]
    except ValueError:
        return None  # UUIDs: NVML indices cannot be told from them here


def detect(kind: str, profile: Profile, gpu_ids: Sequence[int] | None, worker_id: int | None) -> Placement:
    """This worker's placement: the simulator's preset for sim/virtual, NVML's view of the group for SGLang."""
    host = socket.gethostname()
    index = ",".join(str(i) for i in gpu_ids) if gpu_ids is not None else None
    if kind in ("sim", "virtual"):
        from sglang_sim.params import gpu_preset

        g = gpu_preset(profile.server.sim_gpu)
        return Placement(worker_id, host, f"{g.name} (simulated)", index or "0", round(g.mem_bytes / 2**20), "sim")
    if kind == "attach":
        return Placement(worker_id, host)  # the server runs elsewhere; its GPU is not ours to see
    if gpu_ids is None:
        gpu_ids = visible_gpus()  # the worker itself was started with CUDA_VISIBLE_DEVICES
    gpus = procs.gpu_inventory()
    chosen = [g for g in gpus if gpu_ids is None or g["index"] in gpu_ids]
    if not chosen:
        return Placement(worker_id, host, gpu_index=index)
    first = chosen[0]
    return Placement(worker_id, host, str(first["name"]), ",".join(str(g["index"]) for g in chosen),
                     float(first["memory_total_mib"]), str(first["driver"]))


def required_gpus(extra_args: Sequence[str]) -> int:
    """GPUs one server needs: tensor parallel x data parallel size from the server's extra arguments."""
    tp, dp = 1, 1
    for i, a in enumerate(extra_args[:-1]):
        if a in ("--tp-size", "--tp", "--tensor-parallel-size"):
            tp = int(extra_args[i + 1])
        if a in ("--dp-size", "--dp", "--data-parallel-size"):
            dp = int(extra_args[i + 1])
    return tp * dp


def hardware_key(row: Mapping[str, Any]) -> str:
    """A run's or configuration's hardware group: GPU model and memory (unknown for rows before workers)."""
    name = row.get("gpu_name")
    if not name:
        return "unrecorded hardware"
    mem = row.get("gpu_memory_mib")
    return f"{name}, {mem / 1024:.0f} GiB" if mem else str(name)


def hardware_groups(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Rows grouped by hardware_key, groups in first-seen order."""
    out: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        out.setdefault(hardware_key(r), []).append(r)
    return out


def mixed_hardware_reason(rows: Iterable[Mapping[str, Any]]) -> str | None:
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


def pick_winner(configs: Sequence[Mapping[str, Any]], knees: Mapping[int, ConfigKnee],
                eligible: Callable[[int], bool] = lambda _: True) -> tuple[Winner | None, dict[int, ConfigKnee]]:
    """(winner, pool): the highest knee goodput among the eligible final ladders (or screens when no final ran)."""
    finals = {i: k for i, k in knees.items() if k.phase == "final"}
    pool = {i: k for i, k in (finals or dict(knees)).items() if eligible(i)}
    if not pool:
        return None, pool
    cid = max(pool, key=lambda i: pool[i].goodput_tps)
    c = next(c for c in configs if c["id"] == cid)
    return Winner(cid, ServerConfig.from_mapping(c), pool[cid], not finals), pool


@dataclass(frozen=True)
class HardwareRanking:
    """How a study's configurations are ranked given the GPUs they ran on."""

    reason: str | None  # why they are not ranked together (None: one GPU model, or ranked anyway)
    winners: dict[str, Winner | None]  # hardware group -> the knee winner within it
    mixed: bool  # measured on more than one GPU model
    ranked_anyway: bool  # mixed, and the caller asked for one ranking regardless


def rank_by_hardware(configs: Sequence[Mapping[str, Any]], knees: Mapping[int, ConfigKnee],
                     rank_mixed: bool = False, eligible: Callable[[int], bool] = lambda _: True) -> HardwareRanking:
    """Each hardware group's own winner; across groups only when `rank_mixed` (their knees are not comparable)."""
    measured = [c for c in configs if c["id"] in knees]
    groups = hardware_groups(measured)
    winners = {key: pick_winner(rows, {c["id"]: knees[c["id"]] for c in rows}, eligible)[0]
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
