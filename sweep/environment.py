"""Launcher facts under the environments table's column names: one row per study, whatever launcher ran it."""

from __future__ import annotations

from typing import Any

from sweep.profile import Profile


def normalise_env(raw: dict[str, Any], profile: Profile, simulated: bool) -> dict[str, Any]:
    """Launcher facts under the environments table's column names (anything else lands in extra_json)."""
    env = dict(raw)
    gpus = env.pop("gpus", None) or []
    if gpus and not env.get("gpu_name"):
        env["gpu_name"] = gpus[0].get("name")
        env["gpu_memory_mib"] = gpus[0].get("memory_total_mib")
        env["gpu_count"] = len(gpus)
    renames = {"sglang": "sglang_version", "torch": "torch_version", "cuda": "cuda_version",
               "gpu_driver": "driver_version", "python": "python_version"}
    for old, new in renames.items():
        if old in env and not env.get(new):
            env[new] = env.pop(old)
    if not env.get("torch_version") and not simulated:
        try:
            from importlib.metadata import version

            env["torch_version"] = version("torch")
            import torch  # the orchestrator's python is the server's on a GPU host

            env.setdefault("cuda_version", torch.version.cuda)
        except Exception:  # noqa: BLE001 - torch is optional for the orchestrator
            pass
    env["model_path"] = profile.server.model_path
    env["simulated"] = simulated
    if simulated and not env.get("gpu_name"):
        env["gpu_name"] = f"{profile.server.sim_gpu} (simulated)"
        env["gpu_count"] = 1
        env.setdefault("sglang_version", "0.5.17-sim")
    env.setdefault("parallel", _parallel(profile.server.extra_args))
    return env


def _parallel(extra_args: list[str]) -> str:
    tp, dp = "1", "1"
    for i, a in enumerate(extra_args[:-1]):
        if a in ("--tp-size", "--tp", "--tensor-parallel-size"):
            tp = extra_args[i + 1]
        if a in ("--dp-size", "--dp", "--data-parallel-size"):
            dp = extra_args[i + 1]
    return f"TP {tp}, DP {dp}"
