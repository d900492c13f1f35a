"""Where a study runs, as a launcher reports it (`Environment`): the GPU, driver, versions and host that the store
writes to the environments table (sweep.store.environment_record reads them back as a frozen record). Here, below
every floor, so that the launchers that capture it and the store that keeps it share one type."""

from __future__ import annotations

from typing import TypedDict

from sweep.core.types import JSON


class GpuSummary(TypedDict):
    """One GPU as a study's environment lists it."""

    name: str
    memory_total_mib: int


class Environment(TypedDict, total=False):
    """Where a study runs: what a launcher reports (sweep.launchers.base.Launcher.environment()) and, after
    sweep.ladder.environment.normalise_env, the same facts under the environments table's column names (keys that
    are no column land in its extra_json)."""

    kind: str  # the launcher that reports (sweep.launchers.base.LauncherKind)
    engine: str  # the engine dialect's name
    simulated: bool
    host: str
    url: str  # an attached server
    launch: str  # the command that starts each server (keys hidden)
    orchestrator_python: str
    model_path: str | None
    model: str  # the simulator's model preset
    # Versions in the python that runs the server, by distribution (python and cuda too); None: not installed.
    versions: dict[str, str | None]
    gpus: list[GpuSummary]
    gpu_scope: str  # what `gpus` covers where that is not obvious
    gpu_name: str | None
    gpu_count: int
    gpu_memory_mib: int | None
    tp_size: int
    parallel: str  # "TP 2, DP 1"
    # the environments table's columns
    sglang_version: str | None  # the engine's version
    torch_version: str | None
    cuda_version: str | None
    driver_version: str | None
    python_version: str | None
    sim_unmodelled_flags: list[str]  # flags the simulator accepted and ignored
    # the study's dataset (sweep.workload.overlong.input_facts): entries fitted to the context, a trace's timing
    dataset_fit: dict[str, JSON]
    trace: dict[str, JSON]
