"""Launcher facts under the environments table's column names: one row per study, whatever launcher ran it."""

from __future__ import annotations

from collections.abc import Callable

from sweep.core.environment import Environment
from sweep.engines import get as get_dialect
from sweep.launchers.base import ServerHandle
from sweep.profile import Profile
from sweep.profile.grid import expand
from sweep.store import Store


def normalise_env(raw: Environment, profile: Profile, simulated: bool) -> Environment:
    """Launcher facts under the environments table's column names (anything else lands in extra_json).

    The versions the launcher found in the server's python fill the version columns (the engine's package's is
    sglang_version); the other packages' stay in `versions`."""
    env = raw.copy()
    gpus = env.pop("gpus", None) or []
    if gpus and not env.get("gpu_name"):
        env["gpu_name"] = gpus[0]["name"]
        env["gpu_memory_mib"] = gpus[0]["memory_total_mib"]
        env["gpu_count"] = len(gpus)
    versions = dict(env.pop("versions", {}))
    engine = versions.pop(get_dialect(profile.server.engine).version_package, None)
    torch_v, cuda_v, python_v = versions.pop("torch", None), versions.pop("cuda", None), versions.pop("python", None)
    if engine and not env.get("sglang_version"):
        env["sglang_version"] = engine
    if torch_v and not env.get("torch_version"):
        env["torch_version"] = torch_v
    if cuda_v and not env.get("cuda_version"):
        env["cuda_version"] = cuda_v
    if python_v and not env.get("python_version"):
        env["python_version"] = python_v
    if versions:
        env["versions"] = versions
    if not env.get("torch_version") and not simulated:
        try:
            from importlib.metadata import version

            env["torch_version"] = version("torch")
            import torch  # the orchestrator's python is the server's on a GPU host

            env["cuda_version"] = env.get("cuda_version") or torch.version.cuda
        except Exception:  # noqa: BLE001 - torch is optional for the orchestrator
            pass
    env["model_path"] = profile.server.model_path
    env["simulated"] = simulated
    if simulated and not env.get("gpu_name"):
        env["gpu_name"] = f"{profile.server.sim_gpu} (simulated)"
        env["gpu_count"] = 1
        env.setdefault("sglang_version", "0.5.17-sim")
    searched = expand(profile.search.space.tp_size)
    if searched is not None:  # each configuration its own TP: the study's is the searched set
        env["parallel"] = _parallel(profile.server.extra_args, "/".join(map(str, searched)) + " (searched)")
        if simulated:  # a simulated server spans as many GPUs as its configuration's TP: the largest searched
            env["gpu_count"] = max(int(v) for v in searched)
    env.setdefault("parallel", _parallel(profile.server.extra_args))
    return env


def _parallel(extra_args: list[str], tp_searched: str | None = None) -> str:
    """"TP 2, DP 1": from server.extra_args, the TP the searched values where the space searches tp_size."""
    tp, dp = "1", "1"
    for i, a in enumerate(extra_args[:-1]):
        if a in ("--tp-size", "--tp", "--tensor-parallel-size"):
            tp = extra_args[i + 1]
        if a in ("--dp-size", "--dp", "--data-parallel-size"):
            dp = extra_args[i + 1]
    return f"TP {tp_searched or tp}, DP {dp}"


class EnvironmentRecorder:
    """A study's environments row, kept in step with what each launched server says about itself.

    `on_launch` is the ladder's callback: a server that reports it is sweep's simulator (attached, or behind a
    wrapper) labels the study simulated whatever launcher started it, so simulated numbers never pass for a
    measurement of SGLang; flags the simulator accepted and ignored are recorded and said; the server's own
    version (from /server_info) wins over the package's, which a wrapper script hides.
    """

    def __init__(self, store: Store, study_id: int, env: Environment, simulated: bool,
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
        listed = handle.server_info.get("unmodelled_flags")
        flags = [str(f) for f in listed if str(f) not in self.unmodelled] if isinstance(listed, list) else []
        if flags:  # the simulator accepted these and ignored them: the terminal, the DB and the report say so
            self.unmodelled.extend(flags)
            self.env["sim_unmodelled_flags"] = list(self.unmodelled)
            self.store.record_environment(self.study_id, self.env)
            for f in flags:
                self.say(f"[bold yellow]SIMULATOR does not model[/] {f}")
        if handle.version and handle.version != self.env.get("sglang_version"):
            self.env["sglang_version"] = handle.version
            self.store.record_environment(self.study_id, self.env)
