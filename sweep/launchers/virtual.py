"""VirtualLauncher: the Launcher protocol over an in-process simulator Engine (no HTTP, simulated time).

The profile's server.extra_args are parsed by the simulator's own parser (as the simulated server process would
parse them); the knobs go from ServerConfig straight into the engine's EngineKnobs, never through argv.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from typing import Any

from sglang_sim.cli import build_parser, knobs_from, make_params, server_info
from sglang_sim.engine import Engine
from sglang_sim.fidelity import FAULT_FLAGS, fault_flags
from sglang_sim.params import SimOOM, gpu_preset
from sglang_sim.server import VERSION
from sglang_sim.shape import choose_model
from sweep.core.environment import Environment
from sweep.core.errors import LaunchError, ProfileError
from sweep.core.types import ServerConfig
from sweep.engines import Dialect, default
from sweep.launchers.base import LauncherKind, ServerHandle, SpawnCallback, StopReport

DEFAULT_MODEL_PATH = "models/llama3-8b-shape"
FAULT_SPELLINGS = {"--" + k.replace("_", "-") for k in FAULT_FLAGS}


def refuse_faults(extra_args: list[str]) -> None:
    """The virtual driver runs no server process, so process faults cannot happen: say so instead of ignoring them."""
    named = sorted({a.split("=", 1)[0] for a in extra_args if a.split("=", 1)[0] in FAULT_SPELLINGS})
    if named:
        raise ProfileError(f"server.extra_args: {', '.join(named)} fault(s) the simulated server process, which "
                           "the virtual driver does not run; use --driver http to apply them")


class VirtualLauncher:
    """Builds a fresh Engine per configuration, as a relaunch would give a cold server."""

    kind: LauncherKind = "virtual"
    simulated = True

    def __init__(self, gpu: str = "H200", model: str | None = None, extra_args: list[str] | None = None,
                 model_path: str | None = None, dialect: Dialect | None = None):
        """`model` is a sim preset for a model_path without config.json (sglang_sim.shape.choose_model); with no
        model_path, a named preset runs as itself and none at all is models/llama3-8b-shape."""
        self.gpu, self.model = gpu, model
        self.model_path = model_path or (model if model else DEFAULT_MODEL_PATH)
        self.dialect = dialect or default()  # the engine the simulator stands in for
        self.extra_args = list(extra_args or [])
        refuse_faults(self.extra_args)
        gpu_preset(gpu)  # fail fast on unknown presets
        try:
            self.shape = choose_model(self.model_path, model)  # and on a preset its model folder contradicts
        except ValueError as exc:
            raise ProfileError(f"server.sim_model / server.model_path: {exc}") from None

    def _args(self, flags: list[str] | None = None) -> argparse.Namespace:
        """The server arguments other than the five knobs: presets, model folder, server.extra_args and the
        configuration's other flags (parsed as the simulated server parses them: modelled or listed as not)."""
        preset = ["--sim-model", self.model] if self.model else []
        argv = ["--model-path", self.model_path, "--sim-gpu", self.gpu, *preset]
        try:
            return build_parser().parse_args(argv + self.extra_args + (flags or []))
        except SystemExit as exc:  # argparse rejected a flag: same reason a real launch would give
            raise LaunchError(f"bad server flag in {self.extra_args + (flags or [])}", reason="bad_flag") from exc

    def start(self, config: ServerConfig, on_spawn: SpawnCallback | None = None) -> ServerHandle:
        """An in-process engine: no process is spawned, so on_spawn is never called."""
        t0 = time.perf_counter()
        args = self._args(self.dialect.knob_args(ServerConfig(flags=config.flags)))
        faults = fault_flags(args)  # an abbreviated spelling got past refuse_faults
        if faults:
            raise LaunchError(f"the virtual driver cannot apply {', '.join(faults)} (no server process)",
                              reason="bad_flag")
        params = make_params(args)
        try:
            knobs: dict[str, Any] = {k: v for k, v in config.columns().items() if v is not None}
            eng = Engine(params, replace(knobs_from(args), **knobs), seed=args.random_seed or 0)
        except SimOOM as exc:
            raise LaunchError(str(exc), reason="oom") from exc
        return ServerHandle(config=config, url=None, argv=["<virtual>", *self.extra_args, *self.dialect.knob_args(config)],
                            startup_s=time.perf_counter() - t0, simulated=True, version=VERSION,
                            server_info=server_info(args, eng), engine=eng, dialect=self.dialect)

    def stop(self, handle: ServerHandle) -> StopReport:
        handle.engine = None
        return StopReport(graceful=True, seconds=0.0, exit_code=0)

    def alive(self, handle: ServerHandle) -> bool:
        return handle.engine is not None

    def exit_detail(self, handle: ServerHandle) -> str | None:
        """None: the in-process engine has no process that could exit."""
        return None

    def environment(self) -> Environment:
        g, m = gpu_preset(self.gpu), self.shape
        return {"simulated": True, "kind": self.kind, "engine": self.dialect.name, "sglang_version": VERSION,
                "gpu_name": f"{g.name} (simulated)", "gpu_memory_mib": round(g.mem_bytes / 2**20),
                "gpu_count": m.tp, "tp_size": m.tp, "parallel": f"TP {m.tp}, DP 1", "model": m.name,
                "model_path": self.model_path}
