"""The profile: SLA, workload, arrivals, ladder, windows, server and search space. Validated once, hashed.

The package: `base` (the strict model, bounds, safe names), `workload` (requests and arrivals), `search` (the
space of knob values, screening, the sampler); here the SLA, windows, server, soak, cross-check, the Profile and
its loading.

Everything a study needs from its profile is checked here, at load time, before any database is opened:
strict types (a boolean is not an integer, a string is not a number), finite numbers, sane bounds on
every count and duration, names safe as folder names, files that exist (dataset, trace) and simulator
presets that exist. A bad profile is one ProfileError line naming the file and the field.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

import yaml
from pydantic import (
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from sweep import engines
from sweep.core.errors import ProfileError
from sweep.core.types import KNOB_NAMES, ReferenceKind
from sweep.profile.arrival import (
    Arrival,
    ArrivalProcess,
    ClosedArrival,
    GammaArrival,
    OpenArrival,
    RateArrival,
    SendSchedule,
    TraceArrival,
)
from sweep.profile.base import (
    DAY_S,
    MAX_CONCURRENCY,
    MAX_GRID,
    MAX_REQUESTS,
    MAX_TOKENS,
    check_name,
    check_study_name,
    is_loopback,
)
from sweep.profile.base import Strict as _Strict
from sweep.profile.bundled import PROFILES
from sweep.profile.context_len import check_prompt_fits
from sweep.profile.cost import Cost
from sweep.profile.flags import check_flags
from sweep.profile.grid import expand
from sweep.profile.inputs import locate_inputs
from sweep.profile.search import FarWindows, FloatRange, IntRange, Screening, Search, Space, TieBreak
from sweep.profile.server import ServerSpec
from sweep.profile.sla import DEFAULT_TIER, SLA, Tier
from sweep.profile.stages import CrossCheck, Refine, Soak
from sweep.profile.window import EarlyStopRule, Window
from sweep.profile.workload import (
    MAX_FANOUT,
    MAX_TURNS,
    Dataset,
    LengthDist,
    MediaSpec,
    ModalMix,
    Sessions,
    SharedPrefix,
    ThinkTime,
    Workload,
)
from sweep.profile.yaml_keys import load_unique

__all__ = ["DAY_S", "MAX_CONCURRENCY", "MAX_GRID", "MAX_REQUESTS", "MAX_TOKENS", "SLA", "Arrival", "ArrivalProcess",
           "ClosedArrival",
           "CrossCheck", "DEFAULT_TIER", "Dataset", "EarlyStopRule", "FarWindows", "TieBreak", "FloatRange", "GammaArrival", "IntRange", "LengthDist", "MediaSpec", "ModalMix",
           "OpenArrival", "Profile", "RateArrival", "ReferenceKind", "Refine", "Screening", "Search", "SendSchedule",
           "ServerSpec", "Sessions", "SharedPrefix", "Soak", "ThinkTime", "MAX_FANOUT", "MAX_TURNS",
           "Space", "Tier", "TraceArrival", "Window", "Workload", "check_name", "check_study_name", "is_loopback",
           "load_profile", "resolve_profile_path"]


class Profile(_Strict):
    name: str = Field(description="the profile's name (default: the file name)")
    description: str = Field("", description="free text shown in the report")
    sla: SLA = Field(SLA(), description=(
        "the latency bounds a step must meet (section sla); or a list of named tiers (section tiers), each with "
        "these bounds plus `name` and `primary`: the primary tier steers the search, every tier gets its own "
        "knee, winner and launch command from the same windows"))
    tiers: list[Tier] = Field(default_factory=list, max_length=16, description=(
        "the SLA tiers (filled from a list-valued `sla`; none: the one `sla` block is the tier 'default')"))
    workload: Workload = Field(Workload(), description="what the requests look like (section workload)")
    arrival: Arrival = Field(ClosedArrival(),
        description="how requests are sent: closed, constant, poisson, gamma or trace (section arrival)")
    ladder: list[Annotated[int, Field(le=MAX_CONCURRENCY)]] = Field(default_factory=lambda: [16, 32, 64, 128],
        max_length=64, description="client concurrencies climbed per configuration, strictly ascending")
    ladder_max: int = Field(1024, ge=0, le=MAX_CONCURRENCY, description=(
        "a final ladder that passes its top step has not bracketed its knee: it climbs on, doubling the "
        "concurrency until a step fails, up to this concurrency or twice the configuration's "
        "max_running_requests (as the server resolved it), whichever is lower; then it refines (section refine). "
        "An open-loop arrival.rates ladder doubles its rate instead, at most 3 times. 0 (or any value at or below "
        "the ladder's top step): no climbing on; coupled mode and screening never climb on"))
    window: Window = Field(Window(),
        description="warm-up, measured window and drain of every step (section window)")
    refine: Refine = Field(Refine(),
        description="bisecting each final ladder's knee bracket on the same server (section refine)")
    server: ServerSpec = Field(ServerSpec(), description="how the server is started (section server)")
    search: Search = Field(Search(), description="the search over server configurations (section search)")
    soak: Soak = Field(Soak(), description="the winner's long Poisson run (section soak)")
    crosscheck: CrossCheck = Field(CrossCheck(),
        description="an independent reference client after every window (section crosscheck)")
    cost: Cost = Field(Cost(), description="what a GPU hour costs: the cost per token in the answer (section cost)")
    # Where its relative dataset and trace paths are looked up first: the folder of the file it was read from,
    # or the one a worker was given (sweep/profile/inputs.py); None for a profile made in code.
    _folder: Path | None = PrivateAttr(None)

    @property
    def folder(self) -> Path | None:
        """The folder the profile's relative input paths were looked up in first (None: the working directory)."""
        return self._folder

    @field_validator("name")
    @classmethod
    def _safe_name(cls, v: str) -> str:
        return check_name(v)

    @model_validator(mode="before")
    @classmethod
    def _sla_tiers(cls, data: object) -> object:
        """A list-valued `sla` becomes `tiers`, and `sla` the primary tier's bounds (what existing code reads)."""
        if not isinstance(data, dict):
            return data
        sla, tiers = data.get("sla"), data.get("tiers")
        if isinstance(sla, list) and not sla:  # else the default SLA would judge the study, unasked
            raise ValueError("sla: an empty list of tiers (give the SLA bounds, or at least one tier)")
        if isinstance(sla, list):
            if tiers:
                raise ValueError("sla: give the tiers either as a list under sla or under tiers, not both")
            data = {**data, "tiers": sla}
            data.pop("sla")
            tiers = sla
        if isinstance(tiers, list) and tiers:
            if not all(isinstance(t, dict) for t in tiers):
                raise ValueError("sla: every tier is a mapping with a name and SLA bounds")
            marked = [t for t in tiers if t.get("primary") is True]
            if len(marked) > 1:
                raise ValueError(f"sla: {len(marked)} tiers are marked primary; mark exactly one")
            primary = marked[0] if marked else tiers[0]
            bounds = {k: v for k, v in primary.items() if k not in ("name", "primary")}
            if "sla" in data and data["sla"] != bounds and not isinstance(data["sla"], SLA):
                raise ValueError("sla: with tiers, sla is the primary tier's bounds; give the tiers only")
            data = {**data, "sla": bounds}
        return data

    @field_validator("tiers")
    @classmethod
    def _unique_tiers(cls, v: list[Tier]) -> list[Tier]:
        names = [t.name for t in v]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup is not None:
            raise ValueError(f"tier name {dup!r} is used twice")
        return v

    @property
    def primary_tier(self) -> Tier:
        """The tier that steers the search (its bounds are `sla`)."""
        return next((t for t in self.tiers if t.primary), None) or (
            self.tiers[0] if self.tiers else Tier(name=DEFAULT_TIER, primary=True, **self.sla.model_dump()))

    def all_tiers(self) -> list[Tier]:
        """Every tier, the primary first; a single-`sla` profile has one, named 'default'."""
        if not self.tiers:
            return [self.primary_tier]
        p = self.primary_tier
        return [p, *(t for t in self.tiers if t.name != p.name)]

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
        if isinstance(self.arrival, TraceArrival):
            self.arrival.check_ladder(len(self.ladder), self.workload.dataset is not None)
        return self

    @model_validator(mode="after")
    def _flags_known(self) -> Profile:
        """search.space's other flags typed against the engine version's flag table (sweep.profile.flags)."""
        space = self.search.space
        dims = space.flag_dims()
        if dims:
            knobs = {k: expand(getattr(space, k)) for k in KNOB_NAMES if getattr(space, k) is not None}
            typed = check_flags(dims, knobs, self.server.engine, self.server.engine_version, self.search.sampler)
            assert space.__pydantic_extra__ is not None
            space.__pydantic_extra__.update(typed)  # the values as the flags take them (frozen model: in place)
        return self

    @model_validator(mode="after")
    def _searched_knobs_not_fixed(self) -> Profile:
        """A searched knob's flag in server.extra_args would win over the search's value (the extra args come last,
        argparse keeps the last): refused, not silently measured as one configuration."""
        dialect = engines.get(self.server.engine)
        given = set(engines.flags_in_argv(self.server.extra_args))
        clash = [dialect.flag(k) for k, v in self.search.space if v is not None and dialect.flag(k) in given]
        if clash:
            raise ValueError(f"server.extra_args sets {', '.join(clash)}, which search.space searches: "
                             "drop it from extra_args")
        return self

    @property
    def rate_ladder(self) -> bool:
        """Whether the ladder is an open-loop request-rate sweep (arrival.rates): each step's load is its rate."""
        if isinstance(self.arrival, TraceArrival):
            return self.arrival.scales is not None
        return isinstance(self.arrival, RateArrival | GammaArrival) and self.arrival.rates is not None

    @property
    def ladder_rates(self) -> list[float]:
        """The offered rates (req/s) of a rate ladder's steps: arrival.rates, or a time-scale ladder's scales times
        the trace's recorded rate; [] for any other ladder."""
        a = self.arrival
        return a.step_rates() if isinstance(a, TraceArrival) else list(getattr(a, "rates", None) or [])

    def rate_arrival(self, rate: float) -> Arrival:
        """The profile's open-loop arrival offering `rate` req/s (a refinement window of a rate ladder)."""
        if isinstance(self.arrival, TraceArrival):
            return self.arrival.at_rate(rate)
        return self.arrival.model_copy(update={"rate": rate})

    def step_arrival(self, concurrency: int) -> Arrival:
        """The arrival process of one ladder step: an open loop with per-step `rates` offers that step's rate, a
        time-scale ladder (a trace's `scales`) replays the trace at that step's scale."""
        a = self.arrival
        if isinstance(a, TraceArrival) and a.scales is not None and concurrency in self.ladder:
            return a.scaled(a.scales[self.ladder.index(concurrency)])
        if not isinstance(a, RateArrival | GammaArrival) or a.rates is None or concurrency not in self.ladder:
            return a
        return a.model_copy(update={"rate": a.rates[self.ladder.index(concurrency)]})

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
    if not loc and msg.startswith(("search.space.", "server.engine_version:")):  # a whole-profile check names its field
        return f"{path}: {msg}"
    return f"{path}: {loc or '<root>'}: {msg}"


_ARRIVAL_KINDS = frozenset({"closed", "constant", "poisson", "gamma", "trace"})


def _field_path(loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """A pydantic error location without its union-member tags ('list[int]', 'IntRange', 'poisson', ...)."""
    out = tuple(p for p in loc if not (isinstance(p, str) and (not p.isidentifier() or p[:1].isupper())))
    if out[:1] == ("arrival",) and len(out) > 1 and out[1] in _ARRIVAL_KINDS:
        out = out[:1] + out[2:]
    return out


def load_profile(path: str | Path, overrides: Mapping[str, object] | None = None) -> Profile:
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
    check_prompt_fits(prof, str(p))
    return locate_inputs(prof, p.resolve().parent, str(p))


def _read_yaml(p: Path) -> dict[str, object]:
    """The profile file as a mapping (its values whatever YAML made of them, for pydantic to validate): UTF-8
    YAML, one ProfileError line for anything else."""
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
        data = load_unique(text)
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


def _set_field(data: dict[str, object], dotted: str, value: object) -> None:
    """Apply one `--set key.path=value` override; every step of the path must be a mapping."""
    node = data
    *parents, leaf = dotted.split(".")
    for i, part in enumerate(parents):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ProfileError(f"--set {dotted}={_shown(value)}: {'.'.join(parents[:i + 1])} is not a mapping")
        node = child
    node[leaf] = value


def _shown(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def resolve_profile_path(name_or_path: str, profiles_dir: Path | None = None) -> Path:
    """`interactive` -> ./profiles/interactive.yaml where the working directory has one, else the one sweep ships
    (sweep.profile.bundled); a path is returned as is."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return p
    if profiles_dir is not None:
        return profiles_dir / f"{name_or_path}.yaml"
    local = Path("profiles") / f"{name_or_path}.yaml"
    return local if local.is_file() else PROFILES / f"{name_or_path}.yaml"
