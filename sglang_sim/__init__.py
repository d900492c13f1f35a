"""The simulated SGLang server: an engine model of continuous batching plus an SGLang-compatible HTTP front."""

from sglang_sim.engine import Engine, SimRequest, StepResult
from sglang_sim.params import EngineKnobs, SimOOM, SimParams

__all__ = ["Engine", "EngineKnobs", "SimOOM", "SimParams", "SimRequest", "StepResult"]
