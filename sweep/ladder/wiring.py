"""The launcher and the driver a profile asks for: `auto` resolved, a worker's seat applied, probes attached."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TypedDict

from sglang_sim.params import ModelPreset
from sglang_sim.shape import choose_model
from sweep import engines
from sweep.core.environment import Environment
from sweep.core.errors import ProfileError, UsageError
from sweep.drivers import Driver
from sweep.launchers.base import Launcher, ServerHandle
from sweep.launchers.placement import WorkerSeat
from sweep.launchers.prediction import Predictor, gpu_of
from sweep.launchers.procs import gpu_count
from sweep.profile import Profile
from sweep.profile.bundled import model_argument

ROOT = Path(__file__).resolve().parents[2]


def resolve_launcher_kind(profile: Profile, override: str | None = None) -> str:
    """`auto` is the real SGLang server where a GPU and sglang (or a start command) exist, else the simulator."""
    kind = override or profile.server.launcher
    if kind != "auto":
        return kind
    has_sglang = importlib.util.find_spec("sglang") is not None or profile.server.command is not None
    return "sglang" if has_sglang and gpu_count() > 0 else "sim"


def resolve_driver(kind: str, override: str | None) -> str:
    if override and override != "auto":
        if override == "virtual" and kind != "sim":
            raise UsageError("--driver virtual needs the simulated server (launcher sim)")
        return override
    return "virtual" if kind == "sim" else "http"


def model_path(profile: Profile) -> str:
    """server.model_path as the server's --model-path: the local folder (checkout, shipped, working directory)
    where one exists, else as given (a hub name)."""
    return model_argument(profile.server.model_path)


def server_model(profile: Profile) -> ModelPreset:
    """The model the profile's servers run (sglang_sim.shape.choose_model): model_path's config.json, else
    server.sim_model; ProfileError (one line, exit 2) when both exist and disagree, or config.json is unreadable."""
    try:
        return choose_model(model_path(profile), profile.server.sim_model)
    except ValueError as exc:
        raise ProfileError(f"server.sim_model / server.model_path: {exc}") from None


def predictor(model: ModelPreset | None, kind: str, profile: Profile,
              env: Environment) -> Predictor | None:
    """The memory plan of each launch (sweep.launchers.prediction): on the sim preset's GPU, else the GPU the
    launcher's environment names; None for launcher attach (nothing is launched) or a GPU nothing is known of."""
    if model is None or kind == "attach":
        return None
    gpu = gpu_of(env, profile.server.sim_gpu if kind == "sim" else None)
    return None if gpu is None else Predictor(model, gpu, tuple(profile.server.extra_args))


def make_launcher(profile: Profile, kind: str, driver: str, log_dir: Path, seat: WorkerSeat | None = None) -> Launcher:
    spec = profile.server.model_copy(update={"model_path": model_path(profile)})
    if spec.api_key_file is not None and kind != "attach":
        raise ProfileError("server.api_key_file is for launcher attach only (sweep gives the servers it starts "
                           "a key of its own)")
    if kind == "sim" and driver == "virtual":
        from sweep.launchers.virtual import VirtualLauncher

        return VirtualLauncher(gpu=spec.sim_gpu, model=spec.sim_model, extra_args=spec.extra_args,
                               model_path=spec.model_path, dialect=engines.get(spec.engine))
    if kind == "attach":
        from sweep.launchers.attach import AttachLauncher, attach_api_key

        if not spec.url:
            raise ProfileError("server.url is required with launcher attach")
        return AttachLauncher(spec.url, api_key=attach_api_key(spec.api_key_file), dialect=engines.get(spec.engine))
    from sweep.launchers.sglang import SGLangLauncher

    if kind == "sim":
        preset = ["--sim-model", spec.sim_model] if spec.sim_model else []
        sim = spec.model_copy(update={"extra_args": [*spec.extra_args, "--sim-gpu", spec.sim_gpu, *preset]})
        return SGLangLauncher(sim, log_dir, module="sglang_sim", simulated=True, drain_s=spec.shutdown_grace_s,
                              **_seat_args(seat))
    return SGLangLauncher(spec, log_dir, command_prefix=spec.command, drain_s=spec.shutdown_grace_s,
                          **_seat_args(seat))


class _SeatArgs(TypedDict, total=False):
    """SGLangLauncher's keyword arguments that place a worker's servers."""

    gpu_ids: list[int] | None
    ports: tuple[int, int] | None
    extra_env: dict[str, str]


def _seat_args(seat: WorkerSeat | None) -> _SeatArgs:
    """A worker's GPU group and port range as SGLangLauncher arguments."""
    if seat is None:
        return {}
    return {"gpu_ids": None if seat.gpus is None else list(seat.gpus), "ports": seat.ports,
            "extra_env": dict(seat.extra_env)}


def make_driver(profile: Profile, driver: str, launcher: Launcher, client_procs: int = 1) -> Driver:
    """The driver for this study; open-loop schedules are seeded from the workload seed."""
    if driver == "virtual":
        from sweep.drivers.virtual import VirtualDriver

        return VirtualDriver(seed=profile.workload.seed)
    from sweep.drivers.http import HttpDriver
    from sweep.drivers.probes import Clock, GpuProbe, MetricsProbe, Probe, ProcessProbe

    def probes(handle: ServerHandle, clock: Clock) -> list[Probe]:
        out: list[Probe] = [MetricsProbe(handle.url or "", headers=handle.headers(), interval_s=1.0, clock=clock,
                                       engine=handle.dialect),
                          GpuProbe(interval_s=1.0, clock=clock)]
        if handle.pid:
            out.append(ProcessProbe(handle.pid, interval_s=2.0, clock=clock))
        return out

    # Think time travels with the arrival process the ladder passes to every window.
    return HttpDriver(api=profile.workload.api, model_name="default", probes=probes, alive=launcher.alive,
                      seed=profile.workload.seed, client_procs=client_procs,
                      stall_timeout_s=profile.server.stall_timeout_s)
