"""Where a study worker measures: its seat (label, GPU group, port range), the GPUs CUDA_VISIBLE_DEVICES
names, how many GPUs one server needs, and the Placement (host, GPU model, memory) stored with its runs."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sweep.core.types import Placement
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


def required_gpus(extra_args: Sequence[str], tp_size: int | None = None) -> int:
    """GPUs one server needs: tensor parallel x data parallel size, the tensor parallel size from the
    configuration's tp_size knob where set, else from the server's extra arguments (a profile never sets both)."""
    tp, dp = 1, 1
    for i, a in enumerate(extra_args[:-1]):
        if a in ("--tp-size", "--tp", "--tensor-parallel-size"):
            tp = int(extra_args[i + 1])
        if a in ("--dp-size", "--dp", "--data-parallel-size"):
            dp = int(extra_args[i + 1])
    return (tp_size if tp_size is not None else tp) * dp


def group_size(profile: Profile) -> int:
    """GPUs in each worker's group: what the study's largest server needs (the largest tp_size the space searches).
    A configuration of a smaller tp_size runs on the first GPUs of its group and leaves the rest idle meanwhile:
    the simplest plan in which every configuration fits every worker."""
    return required_gpus(profile.server.extra_args, profile.search.space.largest_tp())
