"""Launcher facts under the environments table's column names: one row per study, whatever launcher ran it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sweep.launchers.base import ServerHandle
from sweep.profile import Profile
from sweep.store import Store


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


class EnvironmentRecord:
    """A study's environments row, kept in step with what each launched server says about itself.

    `on_launch` is the ladder's callback: a server that reports it is sweep's simulator (attached, or behind a
    wrapper) labels the study simulated whatever launcher started it, so simulated numbers never pass for a
    measurement of SGLang; flags the simulator accepted and ignored are recorded and said; the server's own
    version (from /server_info) wins over the package's, which a wrapper script hides.
    """

    def __init__(self, store: Store, study_id: int, env: dict[str, Any], simulated: bool,
                 say: Callable[[str], None]):
        self.store, self.study_id, self.env, self.simulated, self.say = store, study_id, env, simulated, say
        self.unmodelled: list[str] = []
        store.record_environment(study_id, env)

    def on_launch(self, handle: ServerHandle) -> None:
        if handle.server_info.get("simulated") and not self.simulated:
            handle.simulated = True
            self.simulated = True
            self.store.mark_study_simulated(self.study_id)
            self.env["simulated"] = True
            self.store.record_environment(self.study_id, self.env)
            self.say("[bold yellow]SIMULATED[/]: the server reports it is sweep's simulator; labelled so.")
        flags = [f for f in handle.server_info.get("unmodelled_flags") or [] if f not in self.unmodelled]
        if flags:  # the simulator accepted these and ignored them: the terminal, the DB and the report say so
            self.unmodelled.extend(flags)
            self.env["sim_unmodelled_flags"] = list(self.unmodelled)
            self.store.record_environment(self.study_id, self.env)
            for f in flags:
                self.say(f"[bold yellow]SIMULATOR does not model[/] {f}")
        if handle.version and handle.version != self.env.get("sglang_version"):
            self.env["sglang_version"] = handle.version
            self.store.record_environment(self.study_id, self.env)
