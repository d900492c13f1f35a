"""Typed hand-offs between pipeline stages (see the data-flow picture in README.md).

Times inside a window are float seconds on one clock (wall clock for the HTTP driver,
simulated clock for the virtual driver); only differences are ever used.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime
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
FlagScalar = bool | int | float | str  # one other flag's value (ServerConfig.flags; bool: a store_true switch)
# A parsed JSON value (json.loads, a server's /server_info, a dataset line): narrow with isinstance before use.
JSON: TypeAlias = dict[str, "JSON"] | list["JSON"] | str | int | float | bool | None
# One value of a flat row by column name (a record's columns(), a table cell, a CSV field): a scalar, never nested.
Cell: TypeAlias = str | int | float | bool | datetime | None
# One value of a JSON document going out (sweep.cli.jsonout writes a datetime as ISO text): read-only containers, so
# a list of rows or a record's columns is one as it is.
JSONOut: TypeAlias = Mapping[str, "JSONOut"] | Sequence["JSONOut"] | Cell


def _knob(label: str, kind: type) -> Any:
    """A ServerConfig field: a server knob, its short label (tables, terminal) and its value type."""
    return field(default=None, metadata={"label": label, "kind": kind})


class Flags(Mapping[str, FlagScalar]):
    """A frozen, hashable mapping of flag name (SGLang's dest spelling, e.g. kv_cache_dtype) -> value, by name."""

    __slots__ = ("_items",)

    def __init__(self, values: Mapping[str, FlagScalar] | None = None):
        self._items: tuple[tuple[str, FlagScalar], ...] = tuple(sorted((values or {}).items()))

    def __getitem__(self, key: str) -> FlagScalar:
        for k, v in self._items:
            if k == key:
                return v
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(self._items)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self._items) == dict(other.items())

    def __repr__(self) -> str:
        return f"Flags({dict(self._items)!r})"

    def __deepcopy__(self, memo: dict[int, object]) -> Flags:
        return self


def flag_json_value(v: object) -> FlagScalar:
    """A flag value read back from JSON (flags_json, a trial's params): bool, int, float or text as it is."""
    return v if isinstance(v, bool | int | float | str) else str(v)


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
    # Every other searched flag of the engine (issue 30), by name; checked against the engine version's flag table
    # (sweep.engines.flag_table) where it enters (profile, --config); stored as server_configs.flags_json.
    flags: Flags = field(default_factory=Flags, metadata={"label": "", "kind": None})
    # flags the study's space fixes (one value): left out of label(), not of the configuration itself
    fixed: frozenset[str] = field(default=frozenset(), compare=False, repr=False, metadata={"label": "", "kind": None})

    def __post_init__(self) -> None:
        if not isinstance(self.flags, Flags):
            object.__setattr__(self, "flags", Flags(self.flags))
    @classmethod
    def from_mapping(cls, values: Mapping[str, object]) -> ServerConfig:
        """The knobs found in any mapping (a store row, /server_info, `--config` text), each of its own type;
        other keys are ignored, a missing or None knob is the server default. ValueError for a bad value."""
        out: dict[str, Any] = {}  # each value checked against its field's `kind` below
        for f in knob_fields(cls):
            v, kind = values.get(f.name), f.metadata["kind"]
            try:
                out[f.name] = None if v is None else kind(v)
            except (TypeError, ValueError):
                raise ValueError(f"{f.name}={v!r} is not {'an' if kind is int else 'a'} {kind.__name__}") from None
        return cls(**out)

    @classmethod
    def of(cls, values: Mapping[str, object], fixed: frozenset[str] = frozenset()) -> ServerConfig:
        """A configuration from knob *and* flag values by name (a trial's params, `--config`, knobs_json): the five
        knobs as from_mapping reads them, every other non-None key a flag (its value as given)."""
        base = cls.from_mapping(values)
        names = {f.name for f in knob_fields(cls)}
        other = {k: flag_json_value(v) for k, v in values.items() if k not in names and v is not None}
        return replace(base, flags=Flags(other), fixed=fixed)

    def knobs(self) -> dict[str, Any]:  # keyword arguments of a knob dataclass (ServerConfig, EngineKnobs)
        """The knobs and flags that are set (not the server default), by name: the five knobs, then the flags."""
        own = {f.name: getattr(self, f.name) for f in knob_fields(type(self))}
        return {**{k: v for k, v in own.items() if v is not None}, **dict(self.flags)}

    def flag_value(self, name: str) -> object:
        """A knob's or flag's value by name (None: left to the server)."""
        return self.knobs().get(name)

    def columns(self) -> dict[str, KnobValue | None]:
        """Every knob by name, None where unset (the store's server_configs columns; flags: flags_json)."""
        return {f.name: getattr(self, f.name) for f in knob_fields(type(self))}

    def flags_json(self) -> str | None:
        """The flags as a JSON object (server_configs.flags_json), None when there are none."""
        return json.dumps(dict(self.flags), sort_keys=True) if self.flags else None

    def key(self) -> str:
        """Stable short id of the knob set, used to de-duplicate launches."""
        blob = json.dumps(self.knobs(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:12]

    def label(self, hide: Collection[str] = ()) -> str:
        """Short text for tables and the terminal, e.g. "mrr=64 mem=0.85 kv_cache_dtype=fp8_e5m2": the knobs, and the
        flags but those the space fixes (`fixed`) or the caller hides (fixed across the configurations shown)."""
        hidden = set(hide) | self.fixed
        labels = {f.name: f.metadata["label"] for f in knob_fields(type(self))}
        parts = [f"{labels.get(k, k)}={_shown(v)}" for k, v in self.knobs().items() if k not in hidden]
        return " ".join(parts) or "defaults"


def _shown(v: object) -> str:
    return ("on" if v else "off") if isinstance(v, bool) else str(v)


def knob_fields(cls: type[ServerConfig] | None = None) -> tuple[Any, ...]:
    """ServerConfig's (or a subclass's) typed knob fields: the five knobs (flags and fixed are not knobs)."""
    return tuple(f for f in fields(cls or ServerConfig) if f.metadata.get("kind") is not None)


def varying_flags(configs: Iterable[ServerConfig]) -> frozenset[str]:
    """The flags whose value is not the same in every one of `configs` (absent counts as a value)."""
    seen: dict[str, set[object]] = {}
    configs = list(configs)
    for c in configs:
        for name in c.flags:
            seen.setdefault(name, set())
    for name in seen:
        seen[name] = {repr(c.flags.get(name)) for c in configs}
    return frozenset(n for n, vals in seen.items() if len(vals) > 1)


def fixed_flags(configs: Iterable[ServerConfig]) -> frozenset[str]:
    """The flags set to one value in all of `configs`: what a label of any of them can leave out."""
    configs = list(configs)
    names = {n for c in configs for n in c.flags}
    return frozenset(names - varying_flags(configs))


KNOB_NAMES: tuple[str, ...] = tuple(f.name for f in knob_fields())
KNOB_LABELS: dict[str, str] = {f.name: f.metadata["label"] for f in knob_fields()}


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
    # server's latency then holds the client's pause, so the ladder measures the step again (sweep.ladder.runner)
    suspended_s: float = 0.0
    # a streamed window (sweep.ladder.recorder): its records' chunks were folded (sweep.analysis.measure.fold_chunks)
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
