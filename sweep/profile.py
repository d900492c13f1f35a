"""The profile: SLA, workload, arrivals, ladder, windows, server and search space. Validated once, hashed.

Everything a study needs from its profile is checked here, at load time, before any database is opened:
strict types (a boolean is not an integer, a string is not a number), finite numbers, sane bounds on
every count and duration, names safe as folder names, files that exist (dataset, trace) and simulator
presets that exist. A bad profile is one ProfileError line naming the file and the field.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from launchers.flags import owned_flags_in
from sweep.errors import ProfileError, UsageError
from sweep.types import KNOB_NAMES, SchedulePolicy

# Sane bounds: far beyond any real study, small enough that nothing downstream overflows or exhausts memory.
MAX_CONCURRENCY = 100_000  # ladder steps, in-flight caps, max_running_requests
MAX_TOKENS = 2_097_152  # any length in tokens (prompt, output, chunk, shared prefix)
MAX_REQUESTS = 1_000_000  # the generated request pool, warm-up requests
MAX_GRID = 100_000  # configurations one search space may expand to (Optuna's grid enumerates them)
DAY_S = 86_400.0
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,99}")


def check_name(value: str, what: str = "name") -> str:
    """A profile or study name becomes a folder under --out: letters, digits and . _ + - only, no path."""
    if not _NAME.fullmatch(value) or ".." in value:
        raise ValueError(f"{what} {value!r} must be 1-100 letters, digits, '.', '_', '+' or '-' "
                         "(it names a folder under --out), starting with a letter or digit")
    return value


def check_study_name(value: str) -> str:
    """--study as a UsageError (exit 2) when it is not a safe folder name."""
    try:
        return check_name(value, "--study")
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def is_loopback(host: str) -> bool:
    """localhost or a loopback address (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class SLA(_Strict):
    """Percentile bounds a ladder step must meet, and the per-request bounds behind goodput."""

    ttft_ms: float = Field(1000, gt=0, le=DAY_S * 1000, description="per-request TTFT bound (goodput) and percentile bound")
    tpot_ms: float = Field(100, gt=0, le=DAY_S * 1000,
        description=("per-request TPOT bound (goodput) and percentile bound, ms per output token "
                     "after the first"))
    e2e_ms: float | None = Field(None, gt=0, le=DAY_S * 1000,
        description="optional end-to-end latency bound per request, ms (none: not judged)")
    ttft_percentile: float = Field(95, gt=0, le=100,
        description="the TTFT percentile a step must keep under ttft_ms")
    tpot_percentile: float = Field(95, gt=0, le=100,
        description="the TPOT percentile a step must keep under tpot_ms")
    e2e_percentile: float = Field(95, gt=0, le=100,
        description="the end-to-end percentile a step must keep under e2e_ms")
    max_error_rate: float = Field(0.01, ge=0, le=1,
        description="largest share of failed requests a passing step may have")


class LengthDist(_Strict):
    """A token-length distribution with clamps."""

    kind: Literal["fixed", "uniform", "normal", "lognormal"] = Field("fixed",
        description="fixed (value), uniform (low..high), normal or lognormal (mean, std)")
    value: int | None = Field(None, ge=1, le=MAX_TOKENS, description="the length, for kind fixed")  # fixed
    low: int | None = Field(None, ge=1, le=MAX_TOKENS, description="smallest length, for kind uniform")  # uniform
    high: int | None = Field(None, ge=1, le=MAX_TOKENS, description="largest length, for kind uniform")
    mean: float | None = Field(None, gt=0, le=MAX_TOKENS,
        description=("mean length, for kind normal or "
                     "lognormal"))  # normal / lognormal (mean of the distribution)
    std: float | None = Field(None, ge=0, le=MAX_TOKENS, description="standard deviation, for kind normal or lognormal")
    min: int = Field(1, ge=1, le=MAX_TOKENS, description="every drawn length is clamped to at least this")
    max: int = Field(32768, ge=1, le=MAX_TOKENS, description="every drawn length is clamped to at most this")

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

    text: float = Field(1.0, ge=0, le=1, description="share of text-only requests")
    image: float = Field(0.0, ge=0, le=1, description="share of requests carrying an image")
    video: float = Field(0.0, ge=0, le=1, description="share of requests carrying a video")
    audio: float = Field(0.0, ge=0, le=1, description="share of requests carrying audio")

    @model_validator(mode="after")
    def _sums_to_one(self) -> ModalMix:
        total = self.text + self.image + self.video + self.audio
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"shares must sum to 1 (got {total:g})")
        return self


class MediaSpec(_Strict):
    image_width: int = Field(448, ge=16, le=8192, description="generated image width, pixels")
    image_height: int = Field(448, ge=16, le=8192, description="generated image height, pixels")
    image_format: Literal["png", "jpeg"] = Field("png", description="generated image encoding")
    video_frames: int = Field(8, ge=1, le=512, description="frames per generated video")
    video_width: int = Field(336, ge=16, le=4096, description="generated video width, pixels")
    video_height: int = Field(336, ge=16, le=4096, description="generated video height, pixels")
    audio_seconds: float = Field(5.0, gt=0, le=600, description="length of generated audio clips, seconds")


class SharedPrefix(_Strict):
    groups: int = Field(0, ge=0, le=MAX_REQUESTS, description="number of distinct system prompts")
    length: int = Field(512, ge=1, le=MAX_TOKENS, description="tokens in each shared system prompt")
    share: float = Field(0.0, ge=0, le=1, description="share of requests that start with one")


class Dataset(_Strict):
    path: str = Field(min_length=1,
        description=("file of prompts: relative paths are looked up in the profile's folder, then the "
                     "working directory"))
    format: Literal["jsonl", "sharegpt"] = Field("jsonl",
        description="jsonl (one object per line) or sharegpt (conversations)")
    on_bad_line: Literal["skip", "fail"] = Field("fail",
        description="skip malformed entries, or fail the profile on the first one")
    _resolved: Path | None = PrivateAttr(None)  # set by load_profile: where `path` was found

    @property
    def file(self) -> Path:
        """The dataset file load_profile found (the profile's folder, then the working directory)."""
        return self._resolved or Path(self.path)


class Workload(_Strict):
    seed: int = Field(0, ge=0, le=2**63 - 1,
        description="seed of every random draw (lengths, media, prefixes, open-loop schedules)")
    num_requests: int = Field(20000, ge=1, le=MAX_REQUESTS,
                              description="size of the replayed pool when workload.replay is on")
    mix: ModalMix = Field(ModalMix(), description="shares of each input modality (section workload.mix)")
    prompt_len: LengthDist = Field(LengthDist(kind="uniform", low=128, high=1024),
        description="prompt length in tokens (section workload.prompt_len)")
    output_len: LengthDist = Field(LengthDist(kind="uniform", low=64, high=512),
        description="output length in tokens, sent as the max new tokens (section workload.output_len)")
    shared_prefix: SharedPrefix = Field(SharedPrefix(),
        description="system prompts shared by a share of requests (section workload.shared_prefix)")
    media: MediaSpec = Field(MediaSpec(),
        description="shape of generated images, videos and audio (section workload.media)")
    dataset: Dataset | None = Field(None,
        description="prompts from a file instead of generated ones (section workload.dataset)")
    api: Literal["generate", "chat"] = Field("generate",
        description="generate (SGLang's /generate) or chat (/v1/chat/completions)")
    replay: StrictBool = Field(False, description=(
        "cycle the first num_requests requests (or the dataset's entries) instead of fresh ones: a server then "
        "sees requests again, and its prefix cache hits them"))


class ClosedArrival(_Strict):
    kind: Literal["closed"] = Field("closed",
        description="closed: `concurrency` users, each sends when its previous request ends")
    think_time_s: float = Field(0.0, ge=0, le=DAY_S,
        description="pause of a user between a response and its next request, seconds")


class RateArrival(_Strict):
    """Open loop at `rate` requests/s: evenly spaced (constant) or exponential gaps (poisson)."""

    kind: Literal["constant", "poisson"] = Field(
        description="constant (evenly spaced) or poisson (exponential gaps)")
    rate: float = Field(gt=0, description="requests per second")
    rates: list[Annotated[float, Field(gt=0)]] | None = Field(
        None, description="offered rate per ladder step (req/s), one per step; overrides rate")
    max_in_flight: int = Field(1024, ge=1, le=MAX_CONCURRENCY,
        description="cap on requests in flight; later arrivals wait and their latency counts the wait")


class GammaArrival(_Strict):
    """Open loop with gamma gaps: mean 1/rate, burstiness by shape (cv = 1/sqrt(shape)); cv > 1 is burstier."""

    kind: Literal["gamma"] = Field("gamma", description="gamma: gamma-distributed gaps (bursty when cv > 1)")
    rate: float = Field(gt=0, description="requests per second")
    shape: float | None = Field(None, gt=0, description="gamma shape k (1 = poisson)")
    cv: float | None = Field(None, gt=0, description="coefficient of variation of the gaps (alternative to shape)")
    rates: list[Annotated[float, Field(gt=0)]] | None = Field(
        None, description="offered rate per ladder step (req/s), one per step; overrides rate")
    max_in_flight: int = Field(1024, ge=1, le=MAX_CONCURRENCY,
        description="cap on requests in flight; later arrivals wait and their latency counts the wait")

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

    kind: Literal["trace"] = Field("trace", description="trace: replay send times from a file")
    path: str = Field(min_length=1,
        description=("the trace file: relative paths are looked up in the profile's folder, then the "
                     "working directory"))
    time_scale: float = Field(1.0, ge=1e-6, le=1e6, description="multiply every trace gap (0.5 = twice as fast)")
    max_in_flight: int = Field(1024, ge=1, le=MAX_CONCURRENCY,
        description="cap on requests in flight; later arrivals wait and their latency counts the wait")
    _resolved: Path | None = PrivateAttr(None)  # set by load_profile: where `path` was found

    @property
    def file(self) -> Path:
        """The trace file load_profile found (the profile's folder, then the working directory)."""
        return self._resolved or Path(self.path)


Arrival = Annotated[ClosedArrival | RateArrival | GammaArrival | TraceArrival, Field(discriminator="kind")]
OpenArrival = RateArrival | GammaArrival | TraceArrival


class Window(_Strict):
    warmup_requests: int = Field(100, ge=0, le=MAX_REQUESTS,
        description="requests completed before the measured window opens (0: warm-up by time)")
    warmup_seconds: float = Field(0.0, ge=0, le=DAY_S,
        description="warm-up time before the measured window, used when warmup_requests is 0")
    measure_seconds: float = Field(900.0, gt=0, le=7 * DAY_S,
        description="length of the measured window of each ladder step, seconds")
    drain_seconds: float = Field(30.0, ge=0, le=DAY_S,
        description="how long requests still in flight after the window may finish before they are cut")
    request_timeout_s: float = Field(600.0, gt=0, le=DAY_S,
        description="a request with no complete response after this long is an error")
    flush_cache: StrictBool = Field(True, description=(
        "empty the server's prefix cache (SGLang POST /flush_cache) before every ladder step, so no step "
        "inherits the previous step's cache"))


class ServerSpec(_Strict):
    launcher: Literal["auto", "sglang", "sim", "attach"] = Field("auto",
        description="auto (SGLang where a GPU and sglang exist, else the simulator), sglang, sim or attach")
    model_path: str = Field("models/llama3-8b-shape",
        description="model folder (or hub name) given to SGLang's --model-path: absolute, a folder of the "
                    "repository (models/...), else as given (the working directory, or a hub name SGLang downloads)")
    extra_args: list[str] = Field(default_factory=list,
        description="extra SGLang flags for every launch, e.g. [--tp-size, '2']")
    startup_timeout_s: float = Field(900.0, gt=0, le=DAY_S,
        description="a server not healthy this long after launch has failed to start")
    shutdown_grace_s: float = Field(60.0, gt=0, le=DAY_S, description="SIGTERM drain budget before the group is killed")
    stall_timeout_s: float = Field(120.0, gt=0, le=DAY_S,
                                   description="no response bytes this long (at most half the request timeout) "
                                               "while requests are in flight: the server is hung")
    # A server on another interface than loopback answers other hosts: only with this opt-in (and a warning).
    allow_non_loopback_host: bool = Field(False,
        description="let server.host be an address other hosts can reach (prints a warning)")
    host: str = Field("127.0.0.1", description="address the launched server binds")
    url: str | None = Field(None, pattern=r"^https?://\S+$", description="the server's URL, for launcher attach only")  # attach only
    sim_gpu: str = Field("H200",
        description="GPU preset of the simulated server")  # the simulated server's GPU preset
    sim_model: str = Field("llama3-8b-shape",
        description="model preset of the simulated server")  # the default model_path's shape
    # argv that starts the real server instead of `python -m sglang.launch_server`, e.g. the
    # GPU host's wrapper script ["bash", "tools/sglang-h200/start-server.sh", BUNDLE, "--"]
    command: list[Annotated[str, Field(min_length=1)]] | None = Field(None, min_length=1,
        description="argv that starts the real server instead of python -m sglang.launch_server (a wrapper; it "
                    "must start the server with python3 -c \"$SWEEP_SERVER_SHIM\" MODULE \"$@\", which adds "
                    "the API key from the environment)")

    @field_validator("extra_args")
    @classmethod
    def _no_owned_flags(cls, v: list[str]) -> list[str]:
        owned = owned_flags_in(v)
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
    def _known_model(cls, v: str) -> str:
        from sglang_sim.params import model_preset

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


class IntRange(_Strict):
    low: int = Field(ge=-1, le=MAX_TOKENS, description="smallest value")
    high: int = Field(ge=-1, le=MAX_TOKENS, description="largest value")
    step: int = Field(1, ge=1, le=MAX_TOKENS, description="spacing of the values")

    @model_validator(mode="after")
    def _ordered(self) -> IntRange:
        if self.low > self.high:
            raise ValueError("low must be <= high")
        return self


class FloatRange(_Strict):
    low: float = Field(description="smallest value")
    high: float = Field(description="largest value")
    step: float | None = Field(None, ge=1e-6, description="spacing of the values (none: continuous, for tpe/gp)")

    @model_validator(mode="after")
    def _ordered(self) -> FloatRange:
        if self.low > self.high:
            raise ValueError("low must be <= high")
        return self


class Space(_Strict):
    """One field per ServerConfig knob: a list of values, a range, or absent (server default)."""

    max_running_requests: list[Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)]] | IntRange | None = Field(None,
        description="values of --max-running-requests (list or range; absent: the server's default)")
    mem_fraction_static: list[float] | FloatRange | None = Field(None,
        description="values of --mem-fraction-static, each in 0.05..0.99")
    chunked_prefill_size: list[Annotated[int, Field(ge=-1, le=MAX_TOKENS)]] | IntRange | None = Field(None,
        description="values of --chunked-prefill-size")
    schedule_policy: list[SchedulePolicy] | None = Field(None,
        description="values of --schedule-policy (SGLang's choices; the simulator orders dfs-weight as lpm and "
                    "priority, routing-key, hrrn, shortest-prefill-first as fcfs, and says so)")

    @field_validator("mem_fraction_static")
    @classmethod
    def _fraction(cls, v: Any) -> Any:
        vals = v if isinstance(v, list) else ([v.low, v.high] if v is not None else [])
        for x in vals:
            if not 0.05 <= x <= 0.99:
                raise ValueError(f"mem_fraction_static {x} outside 0.05..0.99")
        return v

    @field_validator("max_running_requests")
    @classmethod
    def _positive_range(cls, v: Any) -> Any:
        if isinstance(v, IntRange) and not 1 <= v.low <= v.high <= MAX_CONCURRENCY:
            raise ValueError(f"a range within 1..{MAX_CONCURRENCY}")
        return v

    @field_validator(*KNOB_NAMES)  # a ServerConfig knob without a field here fails at import
    @classmethod
    def _nonempty(cls, v: Any) -> Any:
        if isinstance(v, list) and not v:
            raise ValueError("must list at least one value")
        if isinstance(v, list) and len(set(v)) != len(v):
            raise ValueError("lists a value twice")
        return v

    @model_validator(mode="after")
    def _grid_fits(self) -> Space:
        total = 1
        for name in type(self).model_fields:
            n = _value_count(getattr(self, name))
            if n > MAX_GRID:
                raise ValueError(f"{name} expands to {n} values (at most {MAX_GRID}): use a larger step")
            total *= n
        if total > MAX_GRID:
            raise ValueError(f"the space has {total} configurations (at most {MAX_GRID}): use larger steps")
        return self


def _value_count(v: Any) -> int:
    """How many values a knob's list or range expands to (1 when absent)."""
    if v is None:
        return 1
    if isinstance(v, list):
        return len(v)
    if isinstance(v, IntRange):
        return (v.high - v.low) // v.step + 1
    return 2 if v.step is None else int((v.high - v.low) / v.step + 1e-9) + 1


class Screening(_Strict):
    """Successive halving: short windows over every configuration, long ones for the promising few."""

    enabled: bool = Field(False, description="screen every configuration with short windows first")
    fraction: float = Field(0.25, gt=0, le=1, description="screen window = window.measure_seconds x fraction")
    keep: float = Field(0.25, gt=0, le=1, description="share of feasible screened configurations measured fully")
    min_keep: int = Field(1, ge=1, le=MAX_GRID, description="at least this many configurations get a final ladder")


class Search(_Strict):
    space: Space = Field(Space(), description="the knobs and their values (section search.space)")
    sampler: Literal["grid", "tpe", "gp", "auto"] = Field("grid",
        description="grid (every combination), tpe, gp, or auto (grid when it fits n_trials)")
    n_trials: int | None = Field(None, ge=1, le=MAX_GRID,
        description="configurations to measure (default: the whole grid)")
    time_budget_s: float | None = Field(None, gt=0, le=365 * DAY_S,
        description="stop starting configurations when one more would not fit, seconds")
    flatten_threshold: float = Field(0.10, ge=0, le=1, description="min throughput gain per doubling")
    # ladder: one launch per configuration, client concurrency climbs; coupled: the article's experiment,
    # --max-running-requests follows client concurrency step by step (a relaunch per step), other knobs fixed
    mode: Literal["ladder", "coupled"] = Field("ladder",
        description=("ladder (one launch per configuration) or coupled (--max-running-requests "
                     "follows concurrency)"))
    screening: Screening = Field(Screening(), description="successive halving (section search.screening)")
    pruning: bool = Field(False, description="stop a ladder whose goodput trails the median of earlier ones")
    # Several workers share a study: a worker silent for grace_s (default 4 x heartbeat_s) is dead, and its
    # configuration is measured again by another worker (Optuna's trial heartbeat).
    heartbeat_s: float = Field(30.0, ge=1, description="how often a worker's running trial says it is alive")
    grace_s: float | None = Field(None, ge=2, description="silence after which a worker's trial is failed")


class Soak(_Strict):
    """The article's regression step: the winner under Poisson arrivals at its knee rate, for an hour or more."""

    enabled: bool = Field(False, description="soak the winner after the search")
    duration_s: float = Field(3600.0, gt=0, le=7 * DAY_S, description="length of the soak window, seconds")
    rate_fraction: float = Field(0.85, gt=0, le=2, description="share of the knee's request rate to offer")
    max_in_flight: int = Field(1024, ge=1, description="cap on requests in flight during the soak")
    storm_slope_per_min: float = Field(1.0, ge=0, description="retractions/min growth that makes a storm")
    queue_slope_per_min: float = Field(0.5, ge=0, description="queue growth (requests/min) that fails the soak")
    mem_slope_mib_per_min: float = Field(50.0, ge=0, description="GPU memory growth that fails the soak")


class CrossCheck(_Strict):
    """An independent reference client measured right after sweep's own window at every step (sweep crosscheck)."""

    enabled: bool = Field(False, description="measure every step again with the reference client")
    reference: Literal["auto", "h11", "bench_serving"] = Field("auto", description=(
        "auto: SGLang's bench_serving where sglang is importable or `command` is set, else the h11 client "
        "(sweep.drivers.reference)"))
    command: list[str] | None = Field(None, description=(
        "argv prefix that runs `sglang.bench_serving` (e.g. the GPU host's bundle wrapper with SGLANG_MODULE set)"))
    reference_url: str | None = Field(None, description=(
        "where the reference client sends its requests (default: the server's own URL)"))
    tolerance_pct: float = Field(10.0, ge=0, description="relative tolerance, percent of the larger figure")
    tolerance_ms: float = Field(20.0, ge=0, description="absolute latency tolerance; the looser of the two counts")
    min_tail: int = Field(5, ge=1, description="a percentile is judged when this many requests lie beyond it")


class Profile(_Strict):
    name: str = Field(description="the profile's name (default: the file name)")
    description: str = Field("", description="free text shown in the report")
    sla: SLA = Field(SLA(), description="the latency bounds a step must meet (section sla)")
    workload: Workload = Field(Workload(), description="what the requests look like (section workload)")
    arrival: Arrival = Field(ClosedArrival(),
        description="how requests are sent: closed, constant, poisson, gamma or trace (section arrival)")
    ladder: list[Annotated[int, Field(le=MAX_CONCURRENCY)]] = Field(default_factory=lambda: [16, 32, 64, 128],
        max_length=64, description="client concurrencies climbed per configuration, strictly ascending")
    window: Window = Field(Window(),
        description="warm-up, measured window and drain of every step (section window)")
    server: ServerSpec = Field(ServerSpec(), description="how the server is started (section server)")
    search: Search = Field(Search(), description="the search over server configurations (section search)")
    soak: Soak = Field(Soak(), description="the winner's long Poisson run (section soak)")
    crosscheck: CrossCheck = Field(CrossCheck(),
        description="an independent reference client after every window (section crosscheck)")
    # Where its relative dataset and trace paths are looked up first: the folder of the file it was read from,
    # or the one a worker was given (sweep/profile_inputs.py); None for a profile made in code.
    _folder: Path | None = PrivateAttr(None)

    @property
    def folder(self) -> Path | None:
        """The folder the profile's relative input paths were looked up in first (None: the working directory)."""
        return self._folder

    @field_validator("name")
    @classmethod
    def _safe_name(cls, v: str) -> str:
        return check_name(v)

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
    """One line: file, dotted field, problem. Of a union's alternatives, the one that got furthest is named."""
    errors = err.errors()
    field = _field_path(errors[0]["loc"])
    same = [e for e in errors if _field_path(e["loc"])[:len(field)] == field]
    # deepest first; at equal depth a broken constraint says more than "should be a list" of another member
    first = max(same, key=lambda e: (len(_field_path(e["loc"])), not e["type"].endswith("_type")))
    loc = ".".join(str(p) for p in _field_path(first["loc"]))
    msg = _one_line(first["msg"]).removeprefix("Value error, ")
    return f"{path}: {loc or '<root>'}: {msg}"


_ARRIVAL_KINDS = frozenset({"closed", "constant", "poisson", "gamma", "trace"})


def _field_path(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """A pydantic error location without its union-member tags ('list[int]', 'IntRange', 'poisson', ...)."""
    out = tuple(p for p in loc if not (isinstance(p, str) and (not p.isidentifier() or p[:1].isupper())))
    if out[:1] == ("arrival",) and len(out) > 1 and out[1] in _ARRIVAL_KINDS:
        out = out[:1] + out[2:]
    return out


def load_profile(path: str | Path, overrides: dict[str, Any] | None = None) -> Profile:
    """Read and validate a profile YAML file; raise ProfileError with one line on any problem."""
    p = Path(path)
    data = _read_yaml(p)
    data.setdefault("name", p.stem)
    for dotted, value in (overrides or {}).items():
        _set_field(data, dotted, value)
    try:
        prof = Profile.model_validate(data)
    except ValidationError as err:
        raise ProfileError(_format_error(p, err)) from None
    from sweep.profile_inputs import locate_inputs

    return locate_inputs(prof, p.resolve().parent, str(p))


def _read_yaml(p: Path) -> dict[str, Any]:
    """The profile file as a mapping: UTF-8 YAML, one ProfileError line for anything else."""
    if p.is_dir():
        raise ProfileError(f"{p}: is a directory, not a profile file")
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise ProfileError(f"{p}: no such profile file") from None
    except OSError as exc:
        raise ProfileError(f"{p}: cannot read ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        hint = " (UTF-16?)" if raw[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
        raise ProfileError(f"{p}: not UTF-8 text{hint} (byte {exc.start}); save the profile as UTF-8") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\x00" in text:
        raise ProfileError(f"{p}: not UTF-8 text (NUL bytes; UTF-16?); save the profile as UTF-8")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = _one_line(str(getattr(exc, "problem", None) or exc))
        raise ProfileError(f"{p}: not valid YAML{where}: {problem}") from None
    except RecursionError:
        raise ProfileError(f"{p}: not valid YAML: nested too deeply") from None
    if not isinstance(data, dict):
        raise ProfileError(f"{p}: <root>: expected a mapping of profile fields")
    bad_keys = [k for k in data if not isinstance(k, str)]
    if bad_keys:
        raise ProfileError(f"{p}: <root>: field names must be strings (got {bad_keys[0]!r})")
    return data


def _one_line(text: str) -> str:
    return " ".join(text.split())


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
