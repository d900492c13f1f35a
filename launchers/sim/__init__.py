"""The simulated SGLang server: an engine model of continuous batching plus an SGLang-compatible HTTP front."""

from launchers.sim.engine import Engine, SimRequest, StepResult
from launchers.sim.params import EngineKnobs, SimOOM, SimParams

__all__ = ["Engine", "EngineKnobs", "SimOOM", "SimParams", "SimRequest", "StepResult"]
