"""The profile: SLA, workload, arrivals, ladder, windows, server and search space. Validated once, hashed."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from sweep.errors import ProfileError


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SLA(_Strict):
    """Percentile bounds a ladder step must meet, and the per-request bounds behind goodput."""

    ttft_ms: float = Field(1000, gt=0, description="per-request TTFT bound (goodput) and percentile bound")
    tpot_ms: float = Field(100, gt=0)
    e2e_ms: float | None = Field(None, gt=0)
    ttft_percentile: float = Field(95, gt=0, le=100)
    tpot_percentile: float = Field(95, gt=0, le=100)
    e2e_percentile: float = Field(95, gt=0, le=100)
    max_error_rate: float = Field(0.01, ge=0, le=1)


class LengthDist(_Strict):
    """A token-length distribution with clamps."""

    kind: Literal["fixed", "uniform", "normal", "lognormal"] = "fixed"
    value: int | None = Field(None, ge=1)  # fixed
    low: int | None = Field(None, ge=1)  # uniform
    high: int | None = Field(None, ge=1)
    mean: float | None = Field(None, gt=0)  # normal / lognormal (mean of the distribution)
    std: float | None = Field(None, ge=0)
    min: int = Field(1, ge=1)
    max: int = Field(32768, ge=1)

    @model_validator(mode="after")
    def _params(self) -> LengthDist:
        need = {"fixed": ["value"], "uniform": ["low", "high"], "normal": ["mean", "std"],
                "lognormal": ["mean", "std"]}[self.kind]
        missing = [n for n in need if getattr(self, n) is None]
        if missing:
            raise ValueError(f"{self.kind} distribution needs {', '.join(missing)}")
        if self.kind == "uniform" and self.low is not None and self.high is not None and self.low > self.high:
            raise ValueError("low must be <= high")
        if self.min > self.max:
            raise ValueError("min must be <= max")
        return self


class ModalMix(_Strict):
    """Shares of each input modality; must sum to 1."""

    text: float = Field(1.0, ge=0, le=1)
    image: float = Field(0.0, ge=0, le=1)
    video: float = Field(0.0, ge=0, le=1)
    audio: float = Field(0.0, ge=0, le=1)

    @model_validator(mode="after")
    def _sums_to_one(self) -> ModalMix:
        total = self.text + self.image + self.video + self.audio
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"shares must sum to 1 (got {total:g})")
        return self


class MediaSpec(_Strict):
    image_width: int = Field(448, ge=16, le=8192)
    image_height: int = Field(448, ge=16, le=8192)
    image_format: Literal["png", "jpeg"] = "png"
    video_frames: int = Field(8, ge=1, le=512)
    video_width: int = Field(336, ge=16, le=4096)
    video_height: int = Field(336, ge=16, le=4096)
    audio_seconds: float = Field(5.0, gt=0, le=600)


class SharedPrefix(_Strict):
    groups: int = Field(0, ge=0, description="number of distinct system prompts")
    length: int = Field(512, ge=1)
    share: float = Field(0.0, ge=0, le=1, description="share of requests that start with one")


class Dataset(_Strict):
    path: str
    format: Literal["jsonl", "sharegpt"] = "jsonl"
    on_bad_line: Literal["skip", "fail"] = "fail"


class Workload(_Strict):
    seed: int = 0
    num_requests: int = Field(20000, ge=1, description="size of the generated request pool (cycled)")
    mix: ModalMix = ModalMix()
    prompt_len: LengthDist = LengthDist(kind="uniform", low=128, high=1024)
    output_len: LengthDist = LengthDist(kind="uniform", low=64, high=512)
    shared_prefix: SharedPrefix = SharedPrefix()
    media: MediaSpec = MediaSpec()
    dataset: Dataset | None = None
    api: Literal["generate", "chat"] = "generate"


class ClosedArrival(_Strict):
    kind: Literal["closed"] = "closed"
    think_time_s: float = Field(0.0, ge=0)


class RateArrival(_Strict):
    """Open loop at `rate` requests/s: evenly spaced (constant) or exponential gaps (poisson)."""

    kind: Literal["constant", "poisson"]
    rate: float = Field(gt=0, description="requests per second")
    rates: list[Annotated[float, Field(gt=0)]] | None = Field(
        None, description="offered rate per ladder step (req/s), one per step; overrides rate")
    max_in_flight: int = Field(1024, ge=1)


class GammaArrival(_Strict):
    """Open loop with gamma gaps: mean 1/rate, burstiness by shape (cv = 1/sqrt(shape)); cv > 1 is burstier."""

    kind: Literal["gamma"] = "gamma"
    rate: float = Field(gt=0, description="requests per second")
    shape: float | None = Field(None, gt=0, description="gamma shape k (1 = poisson)")
    cv: float | None = Field(None, gt=0, description="coefficient of variation of the gaps (alternative to shape)")
    rates: list[Annotated[float, Field(gt=0)]] | None = Field(
        None, description="offered rate per ladder step (req/s), one per step; overrides rate")
    max_in_flight: int = Field(1024, ge=1)

    @model_validator(mode="after")
    def _one_of(self) -> GammaArrival:
        if (self.shape is None) == (self.cv is None):
            raise ValueError("gamma arrivals need exactly one of shape or cv")
        return self

    @property
    def k(self) -> float:
        """The gamma shape, from shape or cv."""
        return self.shape if self.shape is not None else 1.0 / (self.cv or 1.0) ** 2


class TraceArrival(_Strict):
    """Open loop replaying send times (seconds, one per line, first column of CSV) from a file."""

    kind: Literal["trace"] = "trace"
    path: str
    time_scale: float = Field(1.0, gt=0, description="multiply every trace gap (0.5 = twice as fast)")
    max_in_flight: int = Field(1024, ge=1)


Arrival = Annotated[ClosedArrival | RateArrival | GammaArrival | TraceArrival, Field(discriminator="kind")]
OpenArrival = RateArrival | GammaArrival | TraceArrival


class Window(_Strict):
    warmup_requests: int = Field(100, ge=0)
    warmup_seconds: float = Field(0.0, ge=0)
    measure_seconds: float = Field(900.0, gt=0)
    drain_seconds: float = Field(30.0, ge=0)
    request_timeout_s: float = Field(600.0, gt=0)


class ServerSpec(_Strict):
    launcher: Literal["auto", "sglang", "sim", "attach"] = "auto"
    model_path: str = "models/llama3-8b-shape"
    extra_args: list[str] = Field(default_factory=list)
    startup_timeout_s: float = Field(900.0, gt=0)
    shutdown_grace_s: float = Field(60.0, gt=0, description="SIGTERM drain budget before the group is killed")
    stall_timeout_s: float = Field(120.0, gt=0, allow_inf_nan=False,
                                   description="no response bytes this long (at most half the request timeout) "
                                               "while requests are in flight: the server is hung")
    host: str = "127.0.0.1"
    url: str | None = None  # attach only
    sim_gpu: str = "H200"  # the simulated server's GPU preset
    sim_model: str = "llama3-8b"  # the simulated server's model preset
    # argv that starts the real server instead of `python -m sglang.launch_server`, e.g. the
    # GPU host's wrapper script ["bash", "tools/sglang-h200/start-server.sh", BUNDLE, "--"]
    command: list[str] | None = None


class IntRange(_Strict):
    low: int
    high: int
    step: int = Field(1, ge=1)

    @model_validator(mode="after")
    def _ordered(self) -> IntRange:
        if self.low > self.high:
            raise ValueError("low must be <= high")
        return self


class FloatRange(_Strict):
    low: float
    high: float
    step: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _ordered(self) -> FloatRange:
        if self.low > self.high:
            raise ValueError("low must be <= high")
        return self


class Space(_Strict):
    """Each knob is a list of values, a range, or absent (server default)."""

    max_running_requests: list[int] | IntRange | None = None
    mem_fraction_static: list[float] | FloatRange | None = None
    chunked_prefill_size: list[int] | IntRange | None = None
    schedule_policy: list[Literal["lpm", "fcfs", "random", "dfs-weight", "lof"]] | None = None

    @field_validator("mem_fraction_static")
    @classmethod
    def _fraction(cls, v: Any) -> Any:
        vals = v if isinstance(v, list) else ([v.low, v.high] if v is not None else [])
        for x in vals:
            if not 0.05 <= x <= 0.99:
                raise ValueError(f"mem_fraction_static {x} outside 0.05..0.99")
        return v

    @field_validator("max_running_requests", "chunked_prefill_size", "schedule_policy")
    @classmethod
    def _nonempty(cls, v: Any) -> Any:
        if isinstance(v, list) and not v:
            raise ValueError("must list at least one value")
        return v


class Screening(_Strict):
    """Successive halving: short windows over every configuration, long ones for the promising few."""

    enabled: bool = False
    fraction: float = Field(0.25, gt=0, le=1, description="screen window = window.measure_seconds x fraction")
    keep: float = Field(0.25, gt=0, le=1, description="share of feasible screened configurations measured fully")
    min_keep: int = Field(1, ge=1, description="at least this many configurations get a final ladder")


class Search(_Strict):
    space: Space = Space()
    sampler: Literal["grid", "tpe", "gp", "auto"] = "grid"
    n_trials: int | None = Field(None, ge=1)
    time_budget_s: float | None = Field(None, gt=0)
    flatten_threshold: float = Field(0.10, ge=0, le=1, description="min throughput gain per doubling")
    # ladder: one launch per configuration, client concurrency climbs; coupled: the article's experiment,
    # --max-running-requests follows client concurrency step by step (a relaunch per step), other knobs fixed
    mode: Literal["ladder", "coupled"] = "ladder"
    screening: Screening = Screening()
    pruning: bool = Field(False, description="stop a ladder whose goodput trails the median of earlier ones")
    # Several workers share a study: a worker silent for grace_s (default 4 x heartbeat_s) is dead, and its
    # configuration is measured again by another worker (Optuna's trial heartbeat).
    heartbeat_s: float = Field(30.0, ge=1, description="how often a worker's running trial says it is alive")
    grace_s: float | None = Field(None, ge=2, description="silence after which a worker's trial is failed")


class Soak(_Strict):
    """The article's regression step: the winner under Poisson arrivals at its knee rate, for an hour or more."""

    enabled: bool = False
    duration_s: float = Field(3600.0, gt=0)
    rate_fraction: float = Field(0.85, gt=0, le=2, description="share of the knee's request rate to offer")
    max_in_flight: int = Field(1024, ge=1)
    storm_slope_per_min: float = Field(1.0, ge=0, description="retractions/min growth that makes a storm")
    queue_slope_per_min: float = Field(0.5, ge=0, description="queue growth (requests/min) that fails the soak")
    mem_slope_mib_per_min: float = Field(50.0, ge=0, description="GPU memory growth that fails the soak")


class Profile(_Strict):
    name: str
    description: str = ""
    sla: SLA = SLA()
    workload: Workload = Workload()
    arrival: Arrival = ClosedArrival()
    ladder: list[int] = Field(default_factory=lambda: [16, 32, 64, 128])
    window: Window = Window()
    server: ServerSpec = ServerSpec()
    search: Search = Search()
    soak: Soak = Soak()

    @field_validator("ladder")
    @classmethod
    def _ascending(cls, v: list[int]) -> list[int]:
        if not v:
            raise ValueError("needs at least one step")
        if any(x < 1 for x in v):
            raise ValueError("steps must be >= 1")
        if any(b <= a for a, b in zip(v, v[1:], strict=False)):
            raise ValueError("steps must be strictly ascending")
        return v

    @model_validator(mode="after")
    def _rates_match_ladder(self) -> Profile:
        rates = getattr(self.arrival, "rates", None)
        if rates is not None and len(rates) != len(self.ladder):
            raise ValueError(f"arrival.rates has {len(rates)} values for a ladder of {len(self.ladder)} steps")
        return self

    def step_arrival(self, concurrency: int) -> Any:
        """The arrival process of one ladder step: an open loop with per-step `rates` offers that step's rate."""
        rates = getattr(self.arrival, "rates", None)
        if rates is None or concurrency not in self.ladder:
            return self.arrival
        return self.arrival.model_copy(update={"rate": rates[self.ladder.index(concurrency)]})

    def fingerprint(self) -> str:
        """Hash of what makes two runs comparable: workload, arrival, window and SLA."""
        blob = {k: self.model_dump(mode="json")[k] for k in ("workload", "arrival", "window", "sla")}
        return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:16]


def _format_error(path: Path, err: ValidationError) -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"] if not (isinstance(p, str) and p in ("list[int]", "IntRange")))
    return f"{path}: {loc or '<root>'}: {first['msg']}"


def load_profile(path: str | Path, overrides: dict[str, Any] | None = None) -> Profile:
    """Read and validate a profile YAML file; raise ProfileError with one line on any problem."""
    p = Path(path)
    if not p.exists():
        raise ProfileError(f"{p}: no such profile file")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ProfileError(f"{p}: not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(data, dict):
        raise ProfileError(f"{p}: <root>: expected a mapping of profile fields")
    data.setdefault("name", p.stem)
    for dotted, value in (overrides or {}).items():
        _set_field(data, dotted, value)
    try:
        return Profile.model_validate(data)
    except ValidationError as err:
        raise ProfileError(_format_error(p, err)) from None


def _set_field(data: dict[str, Any], dotted: str, value: Any) -> None:
    """Apply one `--set key.path=value` override; every step of the path must be a mapping."""
    node: Any = data
    *parents, leaf = dotted.split(".")
    for i, part in enumerate(parents):
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ProfileError(f"--set {dotted}={_shown(value)}: {'.'.join(parents[:i + 1])} is not a mapping")
    node[leaf] = value


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def resolve_profile_path(name_or_path: str, profiles_dir: Path | None = None) -> Path:
    """`interactive` -> profiles/interactive.yaml; a path is returned as is."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return p
    base = profiles_dir or Path(__file__).resolve().parent.parent / "profiles"
    return base / f"{name_or_path}.yaml"
