"""Typed hand-offs between pipeline stages (see the data-flow picture in README.md).

Times inside a window are float seconds on one clock (wall clock for the HTTP driver,
simulated clock for the virtual driver); only differences are ever used.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, get_args

if TYPE_CHECKING:
    import numpy as np

Modality = Literal["text", "image", "video", "audio"]


# SGLang's --schedule-policy choices (0.5.23's launch_server --help); the simulator accepts the same set.
SchedulePolicy = Literal["lpm", "random", "fcfs", "dfs-weight", "lof", "priority", "routing-key", "hrrn",
                         "shortest-prefill-first"]
SCHEDULE_POLICIES: tuple[str, ...] = get_args(SchedulePolicy)
# Where a server comes from (profile server.launcher, `--launcher`): auto picks sglang where a GPU and sglang
# exist, else the simulator; attach measures one server that is already running.
LauncherKind = Literal["auto", "sglang", "sim", "attach"]
# What sends the requests (`--driver`): real HTTP, or the simulator's in-process virtual clock; auto picks.
DriverKind = Literal["auto", "http", "virtual"]
# The cross-check's reference client (crosscheck.reference, `sweep crosscheck --reference`).
ReferenceKind = Literal["auto", "h11", "bench_serving"]
# A measured window's status (the runs table's CHECK constraint, `sweep runs --status`).
RunStatus = Literal["running", "completed", "failed", "aborted"]
RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)
KnobValue = int | float | str  # one knob's value (ServerConfig's field types)
# A parsed JSON value (json.loads, a server's /server_info, a dataset line): narrow with isinstance before use.
JSON: TypeAlias = dict[str, "JSON"] | list["JSON"] | str | int | float | bool | None


def _knob(label: str, kind: type) -> Any:
    """A ServerConfig field: a server knob, its short label (tables, terminal) and its value type."""
    return field(default=None, metadata={"label": label, "kind": kind})


@dataclass(frozen=True)
class ServerConfig:
    """One server configuration: the knobs the search moves (None = server default).

    The one home of the knob vocabulary: a field here is a knob (its name is the store column and the
    /server_info key), and every other module takes the list from KNOB_NAMES / KNOB_LABELS. The flag a knob
    becomes is the engine's (sweep.engines: Dialect.knob_args)."""

    max_running_requests: int | None = _knob("mrr", int)
    mem_fraction_static: float | None = _knob("mem", float)
    chunked_prefill_size: int | None = _knob("chunk", int)
    schedule_policy: str | None = _knob("policy", str)
    tp_size: int | None = _knob("tp", int)  # tensor parallel: one server spans this many GPUs (its worker's group)

    @classmethod
    def from_mapping(cls, values: Mapping[str, object]) -> ServerConfig:
        """The knobs found in any mapping (a store row, /server_info, `--config` text), each of its own type;
        other keys are ignored, a missing or None knob is the server default. ValueError for a bad value."""
        out: dict[str, Any] = {}  # each value checked against its field's `kind` below
        for f in fields(cls):
            v, kind = values.get(f.name), f.metadata["kind"]
            try:
                out[f.name] = None if v is None else kind(v)
            except (TypeError, ValueError):
                raise ValueError(f"{f.name}={v!r} is not {'an' if kind is int else 'a'} {kind.__name__}") from None
        return cls(**out)

    def knobs(self) -> dict[str, Any]:  # keyword arguments of a knob dataclass (ServerConfig, EngineKnobs)
        """The knobs that are set (not the server default), by name."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    def columns(self) -> dict[str, KnobValue | None]:
        """Every knob by name, None where unset (the store's server_configs columns)."""
        return asdict(self)

    def key(self) -> str:
        """Stable short id of the knob set, used to de-duplicate launches."""
        blob = json.dumps(self.knobs(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:12]

    def label(self) -> str:
        """Short text for tables and the terminal, e.g. "mrr=64 mem=0.85"."""
        labels = {f.name: f.metadata["label"] for f in fields(self)}
        return " ".join(f"{labels[k]}={v}" for k, v in self.knobs().items()) or "defaults"


KNOB_NAMES: tuple[str, ...] = tuple(f.name for f in fields(ServerConfig))
KNOB_LABELS: dict[str, str] = {f.name: f.metadata["label"] for f in fields(ServerConfig)}


@dataclass(frozen=True)
class MediaItem:
    """One encoded media input: an image (PNG/JPEG), a video (list of frames) or audio (WAV)."""

    kind: Literal["image", "video", "audio"]
    data_urls: tuple[str, ...]  # one for image/audio; one per frame for video
    width: int = 0
    height: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class RequestSpec:
    """One request of the workload, generated once per study from the profile seed."""

    index: int
    input_ids: tuple[int, ...]  # the prompt as token ids (ids 3..999 work with the shipped models)
    output_tokens: int  # max_new_tokens, sent with ignore_eos so lengths are predictable
    modality: Modality = "text"
    media: tuple[MediaItem, ...] = ()
    prefix_group: int | None = None  # which shared system prompt, if any
    text: str | None = None  # optional text form of the prompt (chat API, multimodal)

    @property
    def prompt_tokens(self) -> int:
        return len(self.input_ids)


@dataclass(frozen=True)
class TurnSpec:
    """One turn of a session: the new user message of each parallel sub-request (one unless the turn fans out),
    each a RequestSpec holding only the new message and its reply's length, and the pause before the turn."""

    branches: tuple[RequestSpec, ...]
    think_s: float = 0.0


@dataclass(frozen=True)
class SessionSpec:
    """One conversation of the workload, a pure function of (profile, index) as requests are: a system prompt
    (the shared prefix, when the session drew one) and its turns. What later turns send depends on the server's
    replies, so the prompts themselves are made while the session runs (sweep.workload.sessions.Conversation)."""

    index: int
    turns: tuple[TurnSpec, ...]
    system_ids: tuple[int, ...] = ()
    system_text: str = ""
    prefix_group: int | None = None
    max_context: int = 1 << 30


# RequestRecord.error_kind of a request sent in the window and still running when the drain grace ended: cut by the
# window's edge, not a server error (sweep.analysis.measure counts it apart, n_cut, never against max_error_rate)
CUT = "cut"
# ... of a request scheduled but never sent (open loop: the in-flight cap stayed full to the drain's end): an error
UNSENT = "unsent"


@dataclass
class RequestRecord:
    """What the client saw of one request. Times in seconds on the driver's clock."""

    index: int
    concurrency: int
    scheduled_at: float  # when it should have been sent (open loop) or was sent (closed loop)
    sent_at: float
    first_token_at: float | None = None
    finished_at: float | None = None
    chunk_times: list[float] = field(default_factory=list)  # arrival of each content chunk
    chunk_tokens: list[int] = field(default_factory=list)  # new tokens carried by each chunk
    prompt_tokens: int = 0  # as the server counted them (the client's own count where the server says nothing)
    output_tokens: int = 0
    sent_prompt_tokens: int = 0  # as sent: text tokens plus the estimated media tokens (sweep.workload.requests)
    sent_output_tokens: int = 0  # as sent: max_new_tokens
    cached_tokens: int = 0
    num_retractions: int = 0
    modality: str = "text"
    warmup: bool = False
    error: str | None = None  # None = success
    error_kind: str | None = None  # status, timeout, disconnect, malformed, server_error, unsent; CUT: no error
    turn: int | None = None  # sessions: the turn (1 = the first), None for a single-turn workload
    branch: int | None = None  # sessions: which parallel sub-request of the turn (0 unless the turn fans out)
    context_tokens: int = 0  # sessions: tokens of the conversation before this turn's new message
    session_turns: int | None = None  # sessions: turns the session ran, set when it ended (None: cut off, unfinished)


@dataclass(frozen=True)
class Sample:
    """One probe reading: server /metrics, GPU (pynvml) or process (psutil)."""

    t: float
    source: str  # metrics | gpu | process | client
    name: str
    value: float
    labels: str = ""  # compact "k=v,k=v" form


@dataclass(frozen=True)
class ClientSamples:
    """One client process's raw self-check readings of a window; sweep.analysis.measure_client turns them into figures."""

    dispatch_lags: np.ndarray  # seconds late, one per dispatch scheduled in the measured window
    cap_waits: np.ndarray  # open loop: seconds a due request waited for an in-flight slot (measured window)
    ticks: np.ndarray  # rows (t, event-loop lag s, process CPU s), one per self-check tick (the whole run)
    max_in_flight_seen: int = 0


# what a streaming driver hands each request that ended, once the measured window's [start, end) is known
RecordSink = Callable[[RequestRecord, float, float], None]

SERVER_DIED = "server died during the window"  # WindowResult.aborted when the server process exited


@dataclass
class WindowResult:
    """Everything a driver observed for one ladder step; the driver computes no statistics."""

    concurrency: int
    records: list[RequestRecord]
    samples: list[Sample]
    window_start: float  # start of the measured window (after warm-up)
    window_end: float  # end of the measured window (before drain)
    # how the window opened (issue 28 §1, sweep.profile.warmup): the requests completed by then, the seconds from the
    # step's start to it, and which condition was met last ("requests", "seconds", "load", "bound"; None: unknown)
    warmup_requests: int
    warmup_seconds: float
    counters_start: dict[str, float] = field(default_factory=dict)  # server counters at window start
    counters_end: dict[str, float] = field(default_factory=dict)  # ... and at window end
    ttft_histogram: list[tuple[float, float]] = field(default_factory=list)  # (le, delta count) over window
    client: tuple[ClientSamples, ...] = ()  # one per client process; none where nothing runs a client (virtual)
    engine_steps: int | None = None  # virtual time: the simulator's engine steps (what the window cost to simulate)
    simulated: bool = False
    aborted: str | None = None  # reason if the window could not complete
    # seconds the client process itself was not running (SIGSTOP, a VM pause, swap) inside the measured window: the
    # server's latency then holds the client's pause, so the ladder measures the step again (sweep.study.ladder)
    suspended_s: float = 0.0
    # a streamed window (sweep.study.recorder): its records' chunks were folded (sweep.analysis.measure.fold_chunks)
    # and these are the ITL gaps (ms) of its measured successful records, in the records' order; None: not folded
    itl_ms: np.ndarray | None = None
    window_opened_by: str | None = None  # the warm-up condition met last (see warmup_requests above)
    # the window stopped before its end because its step cannot pass (sweep.analysis.early_stop): why, in words; its
    # window_end is then the moment it stopped, and the requests still running were cut there
    stopped_early: str | None = None

    @property
    def measured_seconds(self) -> float:
        return self.window_end - self.window_start


@dataclass(frozen=True)
class Placement:
    """Where a measurement ran: the study worker (its sweep_workers row), its host and its GPU group."""

    worker_id: int | None = None
    host: str | None = None
    gpu_name: str | None = None
    gpu_index: str | None = None  # the group's GPU indices, e.g. "0" or "2,3"
    gpu_memory_mib: float | None = None
    gpu_driver: str | None = None

    def columns(self) -> dict[str, str | float | None]:
        """The runs / server_configs columns this placement fills."""
        return asdict(self)
