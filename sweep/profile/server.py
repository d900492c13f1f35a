"""The server a profile launches (or attaches to): engine, launcher, model, flags, timeouts, host, simulator presets."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field, ValidationInfo, field_validator, model_validator

from sweep import engines
from sweep.core.types import LauncherKind
from sweep.profile.base import DAY_S, is_loopback
from sweep.profile.base import Strict as _Strict

__all__ = ["ServerSpec"]


class ServerSpec(_Strict):
    engine: str = Field(engines.DEFAULT_ENGINE,
        description="the inference engine the server runs (its flags, paths and metric names): sglang")
    engine_version: str = Field("0.5.17", pattern=r"^[0-9][0-9A-Za-z.+-]{0,40}$",
        description="the engine version whose stored flag table checks search.space's flags before anything runs "
                    "(stored: sglang 0.5.17 and 0.5.23; `sweep doctor` checks them against the installed server)")
    launcher: LauncherKind = Field("auto",
        description="auto (SGLang where a GPU and sglang exist, else the simulator), sglang, sim or attach")
    model_path: str = Field("models/llama3-8b-shape",
        description="model folder (or hub name) given to SGLang's --model-path: absolute, a folder of the "
                    "repository (models/...), else as given (the working directory, or a hub name SGLang downloads)")
    extra_args: list[str] = Field(default_factory=list,
        description="extra SGLang flags for every launch, e.g. [--tp-size, '2']")
    startup_timeout_s: float = Field(900.0, gt=0, le=DAY_S,
        description="a server not healthy this long after launch has failed to start")
    skip_infeasible: bool = Field(True,
        description="skip, without launching it, a configuration whose predicted memory plan says the server "
                    "will not start (recorded as `predicted infeasible` with the numbers); false launches it anyway "
                    "(sweep knee --no-skip-infeasible)")
    shutdown_grace_s: float = Field(60.0, gt=0, le=DAY_S, description="SIGTERM drain budget before the group is killed")
    stall_timeout_s: float = Field(120.0, gt=0, le=DAY_S,
                                   description="no response bytes this long (at most half the request timeout) "
                                               "while requests are in flight: the server is hung")
    # A server on another interface than loopback answers other hosts: only with this opt-in (and a warning).
    allow_non_loopback_host: bool = Field(False,
        description="let server.host be an address other hosts can reach (prints a warning)")
    host: str = Field("127.0.0.1", description="address the launched server binds")
    url: str | None = Field(None, pattern=r"^https?://\S+$", description="the server's URL, for launcher attach only")  # attach only
    api_key_file: str | None = Field(None, min_length=1, description=(
        "launcher attach: a file whose first line is the attached server's API key (else the environment "
        "variable SWEEP_API_KEY; never argv); sent as Authorization: Bearer on every request"))
    sim_gpu: str = Field("H200",
        description="GPU preset of the simulated server")  # the simulated server's GPU preset
    sim_model: str | None = Field(None,
        description="model preset for a model_path without config.json (a hub name): the simulator and the "
                    "launch prediction otherwise read the shape from model_path's config.json, and refuse a "
                    "sim_model that disagrees with it (default: llama3-8b where neither exists)")
    # argv that starts the real server instead of `python -m sglang.launch_server`, e.g. the
    # GPU host's wrapper script ["bash", "tools/sglang-h200/start-server.sh", BUNDLE, "--"]
    command: list[Annotated[str, Field(min_length=1)]] | None = Field(None, min_length=1,
        description="argv that starts the real server instead of python -m sglang.launch_server (a wrapper; it "
                    "must start the server with python3 -c \"$SWEEP_SERVER_SHIM\" MODULE \"$@\", which adds "
                    "the API key from the environment)")

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, v: str) -> str:
        if v not in engines.names():
            raise ValueError(f"unknown engine {v!r} (choose from {', '.join(engines.names())})")
        return v

    @field_validator("extra_args")
    @classmethod
    def _no_owned_flags(cls, v: list[str], info: ValidationInfo) -> list[str]:
        owned = engines.get(info.data.get("engine", engines.DEFAULT_ENGINE)).owned_flags_in(v)
        if owned:
            raise ValueError(f"{', '.join(owned)}: set by the launcher, not by extra_args "
                             "(use server.host / server.model_path; port and API key are sweep's)")
        return v

    @field_validator("sim_gpu")
    @classmethod
    def _known_gpu(cls, v: str) -> str:
        from sglang_sim.params import gpu_preset

        gpu_preset(v)  # ValueError naming the known presets
        return v

    @field_validator("sim_model")
    @classmethod
    def _known_model(cls, v: str | None) -> str | None:
        from sglang_sim.params import model_preset

        if v is not None:
            model_preset(v)
        return v

    @field_validator("host")
    @classmethod
    def _loopback_unless_opted_in(cls, v: str, info: ValidationInfo) -> str:
        if not re.fullmatch(r"[A-Za-z0-9.:_-]{1,253}", v):
            raise ValueError(f"{v!r} is not a host name or IP address")
        if not is_loopback(v) and not info.data.get("allow_non_loopback_host"):
            raise ValueError(f"{v!r} is not a loopback address: the server would answer other hosts; "
                             "set server.allow_non_loopback_host: true to mean it")
        return v

    @model_validator(mode="after")
    def _attach_has_url(self) -> ServerSpec:
        if self.launcher == "attach" and not self.url:
            raise ValueError("launcher attach needs server.url")
        return self
