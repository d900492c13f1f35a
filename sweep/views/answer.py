"""The final answer of a study, per SLA tier, as frozen dataclasses: the winner, its knee, its goodput, the gain over
SGLang's defaults, why its knee is where it is, and what to launch. A person who reads only this should be able to
deploy. Built from the store alone (`build_answer`): the primary tier from the study's own verdicts (StudyContext),
every other tier judged again on the same stored windows (sweep.analysis.tiers), never measured again.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

from sweep import engines
from sweep.analysis.binding import Binding, binding
from sweep.analysis.boundary import steps_boundary, with_boundary
from sweep.analysis.cost import usd_per_million_output
from sweep.analysis.knee import ConfigKnee
from sweep.analysis.ladder_steps import LadderStep, same_windows
from sweep.analysis.loads import knee_load
from sweep.analysis.significance import Difference, difference, ties, win_probabilities
from sweep.analysis.tiers import StoredRequest, judge_tier, same_bounds
from sweep.core.errors import UsageError
from sweep.core.types import JSON, KNOB_LABELS, JSONOut, KnobValue, ServerConfig
from sweep.profile import DEFAULT_TIER, SLA, Tier
from sweep.profile.grid import grid
from sweep.profile.window import DEFAULT_MIN_REQUESTS
from sweep.store import ConfigRecord, Store, WinnerRecord
from sweep.views.cost import StudyCost, cost_of
from sweep.views.read_model import WinnerDecision, config_steps, decide_winner
from sweep.views.study import StudyContext
from sweep.views.tiebreak import ScreenAgain, TieBreak, screen_again, tie_break

ANSWER_SCHEMA_VERSION = 1  # of Answer.document (docs/json-schema/answer.json)


@dataclass(frozen=True)
class Gain:
    """The winner against SGLang's defaults (configuration 0) in one tier."""

    defaults_id: int
    defaults_knee: ConfigKnee | None  # None: the defaults never met this tier's SLA
    diff: Difference | None  # winner − defaults (None when the defaults have no knee)
    defaults_won: bool


@dataclass(frozen=True)
class TierAnswer:
    """One tier's answer."""

    tier: str
    primary: bool
    sla: SLA
    winner_id: int | None
    label: str  # the winner's knobs, e.g. "mrr=64 mem=0.85", or "SGLang defaults"
    knobs: Mapping[str, KnobValue]  # the winner's set knobs (the launch command's flags)
    knee: ConfigKnee | None
    screen_only: bool
    # (the knee's load, the lowest failing load above it) of the winner: concurrencies, or offered rates (req/s) in an
    # open-loop rate ladder (knee.offered_rps set)
    bracket: tuple[float, float | None] | None
    shape: str | None  # smooth | cliff, where the boundary refinement stored one
    gain: Gain | None  # None: the defaults were not measured (search.baseline false)
    binding: Binding | None  # the winner's binding constraint
    bindings: Mapping[int, Binding] = field(default_factory=dict)  # every configuration's
    win_prob: Mapping[int, float] = field(default_factory=dict)  # P(winner's knee goodput higher than config's)
    tied: tuple[int, ...] = ()  # configurations the data do not rank below the winner (P < 0.9), the defaults too
    knees: Mapping[int, ConfigKnee] = field(default_factory=dict)
    same_as: tuple[int, ...] = ()  # configurations that measured exactly what the winner measured: one answer
    knee_at_top: bool = False  # no window above the winner's knee was measured: not bracketed
    # cost.gpu_hour_usd set: USD per million output tokens at the knee (sweep.analysis.cost), the winner's on its GPU
    # count (tp_size, else 1) and SGLang's defaults' (None: no price, no knee, or the defaults not measured)
    gpus: int = 1
    usd_per_mtok: float | None = None
    defaults_usd_per_mtok: float | None = None


@dataclass(frozen=True)
class Answer:
    """A study's final answer: one TierAnswer per tier, the primary first, and what the launch command needs."""

    study: str
    simulated: bool
    model_path: str
    extra_args: tuple[str, ...]
    tiers: tuple[TierAnswer, ...]
    labels: Mapping[int, str] = field(default_factory=dict)
    note: str | None = None  # why no tier names a winner (mixed hardware), if so
    trace_rps: float | None = None  # a time-scale ladder's trace: its recorded rate (req/s), the unit of its scales
    cost: StudyCost | None = None  # GPU-hours spent, inside windows that informed it, saved (sweep.views.cost)
    engine: str = engines.DEFAULT_ENGINE  # the profile's server.engine: whose launch command
    gpu_hour_usd: float | None = None  # the profile's cost.gpu_hour_usd (None: no cost line)
    tie_break: TieBreak | None = None  # finals measured again before one won (search.tie_break), and what it decided
    screen_again: ScreenAgain | None = None  # the screen's ties measured again (search.screening.ties), and who went on

    def launch_argv(self, knobs: Mapping[str, JSON]) -> list[str]:
        """The launch argv of a tier's winner (`python -m sglang.launch_server ...`), as the launcher builds it."""
        dialect = engines.get(self.engine) if self.engine in engines.names() else engines.default()
        return [*dialect.launch_command(),
                *dialect.server_argv(self.model_path, ServerConfig.of(knobs), list(self.extra_args))]

    def document(self, config_id: int | None = None) -> dict[str, JSONOut]:
        """The answer as plain data, versioned (answer.json, `sweep knee --json`, `sweep explain --format json`;
        docs/json-schema/answer.json); with `config_id`, each tier's per-configuration maps keep that one only."""
        doc = asdict(self)
        for t, tier in zip(doc["tiers"], self.tiers, strict=True):
            t["sla"] = tier.sla.model_dump(mode="json")  # a pydantic model: its fields, not its repr
            # what to run: the winner's launch command, shell-quoted on one line, and its argv (None: no winner)
            argv = self.launch_argv(tier.knobs) if tier.winner_id is not None else None
            t["command"], t["argv"] = (shlex.join(argv), argv) if argv is not None else (None, None)
        if config_id is not None:
            for t in doc["tiers"]:
                for key in ("bindings", "win_prob", "knees"):
                    t[key] = {k: v for k, v in t[key].items() if k == config_id}
        return {"schema_version": ANSWER_SCHEMA_VERSION, **doc}

    def to_json(self) -> str:
        """The answer as JSON (answer.json beside the report)."""
        return json.dumps(self.document(), default=str, indent=2)


def is_defaults(config_row: ConfigRecord) -> bool:
    """Whether a configuration is SGLang's defaults: every knob unset."""
    return not config_row.config.knobs()


def defaults_ids(configs: Sequence[ConfigRecord]) -> frozenset[int]:
    """The ids of the configurations that are SGLang's defaults (not aborted attempts)."""
    return frozenset(c.id for c in configs if c.status != "aborted" and is_defaults(c))


def _label(configs: Sequence[ConfigRecord], cid: int, labels: Mapping[int, str]) -> str:
    row = next((c for c in configs if c.id == cid), None)
    if row is not None and is_defaults(row):
        return "SGLang defaults (no searched flag)"
    return labels.get(cid, str(cid))


def _bracket(steps: Sequence[LadderStep], knee: ConfigKnee) -> tuple[float, float | None]:
    """(the knee's load, the lowest failing load above it) over every phase but the soak: concurrencies, or offered
    rates in an open-loop rate ladder."""
    at = knee_load(knee)
    above = sorted(s.load for s in steps if s.phase != "soak" and s.load > at and not s.stats.passes_sla)
    if knee.offered_rps is None:
        return knee.concurrency, (int(above[0]) if above else None)
    return at, (above[0] if above else None)


def _at_top(steps: Sequence[LadderStep], knee: ConfigKnee) -> bool:
    """Whether the knee is its ladder's top window: nothing of more load was measured (not bracketed)."""
    load = knee_load(knee)
    return not any(s.load > load for s in steps)


def same_label(configs: Sequence[ConfigRecord], ids: Sequence[int]) -> str:
    """One label for configurations that measured alike: the knobs they share, then each differing knob's values
    ("mrr=64 chunk=8192, mem 0.6 or 0.85: no difference measured")."""
    rows = [c for c in configs if c.id in ids]
    knobs = [c.config.knobs() for c in rows]
    names = list(dict.fromkeys(k for kn in knobs for k in kn))
    shared = {k: knobs[0][k] for k in names if all(k in kn and kn[k] == knobs[0][k] for kn in knobs)}
    differ = [k for k in names if k not in shared]
    head = " ".join(f"{KNOB_LABELS.get(k, k)}={v}" for k, v in shared.items())
    tail = "; ".join(f"{KNOB_LABELS.get(k, k)} " + " or ".join(str(kn.get(k, 'default')) for kn in knobs)
                     for k in differ)
    return f"{head + ', ' if head else ''}{tail}: no difference measured"


def _shape(knee: ConfigKnee | None) -> str | None:
    """smooth | cliff, where the boundary refinement ran for this knee (server_configs.boundary_shape)."""
    return knee.boundary_shape if knee is not None else None


def build_answer(store: Store, ctx: StudyContext, extra: Sequence[Tier] = ()) -> Answer:
    """Every tier's answer (the profile's, then `extra`, e.g. `sweep report --tier FILE`), from the store."""
    prof = ctx.profile
    tiers: list[Tier] = list(prof.all_tiers()) if prof is not None else []
    for t in extra:  # a tier of the same name would be dropped or shadow the study's: refused, one line
        if t.name in {x.name for x in tiers}:
            raise UsageError(f"--tier {t.name}: the study already has a tier named {t.name!r}"
                             + (" (a single-sla profile's tier)" if t.name == DEFAULT_TIER else "")
                             + "; give the extra tier another name")
        tiers.append(t)
    steps = config_steps(ctx.configs, ctx.runs)
    requests: dict[int, list[StoredRequest]] = {}

    def load_requests() -> dict[int, list[StoredRequest]]:
        if not requests:
            for ss in steps.values():
                for s in ss:
                    requests[s.run_id] = [r.judged() for r in store.requests_for_run(s.run_id)]
        return requests

    space = grid(prof.search.space) if prof is not None else {}
    flatten = prof.search.flatten_threshold if prof is not None else 0.10
    min_requests = prof.window.min_requests if prof is not None else DEFAULT_MIN_REQUESTS
    note = ctx.hardware.reason if ctx.hardware is not None else None
    out = []
    for tier in tiers:
        stored = prof.sla if prof is not None else None
        keep = stored is not None and same_bounds(tier, stored)
        if keep:
            knees: Mapping[int, ConfigKnee] = ctx.knees
            judged: Mapping[int, Sequence[LadderStep]] = {
                cid: [s for s in ss if s.phase == knees[cid].phase or (s.phase, knees[cid].phase) == ("refine", "final")]
                if cid in knees else ss
                for cid, ss in steps.items()}
        else:
            verdicts = judge_tier(tier.name, tier.bounds(), False, stored, steps, load_requests(), flatten, min_requests)
            judged = verdicts.steps
            # the tier's own SLA boundary, where the configuration's ladder was refined and brackets this tier
            knees = {cid: with_boundary(k, steps_boundary(judged.get(cid, ()), load_requests(), tier.bounds()))
                     for cid, k in verdicts.knees.items()}
        # the one winner rule (views/read_model.py), on this tier's knees: the primary tier's is the study's own
        decision = decide_winner(ctx.configs, ctx.runs, knees, ctx.env, ctx.profile_raw)
        winner, pool = (ctx.winner if keep else decision.winner), decision.pool
        if note is not None:
            winner = None
        out.append(_tier_answer(ctx, tier, winner.id if winner else None, bool(winner and winner.screen_only),
                                knees, pool, judged, space))
    server = ctx.profile_raw.get("server")
    extra_args = server.get("extra_args", []) if isinstance(server, dict) else []
    price = prof.cost.gpu_hour_usd if prof is not None else None
    return Answer(ctx.study.name, ctx.study.simulated,
                  str(ctx.env.model_path or (prof.server.model_path if prof else "MODEL")),
                  tuple(str(a) for a in extra_args) if isinstance(extra_args, list) else (), tuple(_priced(t, ctx, price) for t in out),
                  {c.id: _label(ctx.configs, c.id, ctx.labels) for c in ctx.configs},
                  note, trace_rate(ctx),
                  cost_of(ctx.configs, ctx.runs, prof, ctx.winner.id if ctx.winner is not None else None),
                  str(server.get("engine", engines.DEFAULT_ENGINE)) if isinstance(server, dict)
                  else engines.DEFAULT_ENGINE, price,
                  tie_break(ctx.configs, ctx.runs, flatten, ctx.env, ctx.profile_raw,
                            ctx.winner.id if ctx.winner is not None else None), screen_again(ctx.configs, ctx.runs))


def trace_rate(ctx: StudyContext) -> float | None:
    """A time-scale ladder's recorded trace rate (req/s): each ladder step's offered rate over its scale (the
    lowest: a climbing-on window carries its ladder step's label at a higher rate); None for any other ladder."""
    prof = ctx.profile
    scales = getattr(prof.arrival, "scales", None) if prof is not None else None
    if prof is None or not scales:
        return None
    rates = [r.offered_rps / scales[prof.ladder.index(r.concurrency)] for r in ctx.runs
             if r.offered_rps is not None and r.phase != "refine" and r.concurrency in prof.ladder]
    return min(rates) if rates else None


def _gpus(ctx: StudyContext, cid: int) -> int:
    """The GPUs one server of configuration `cid` spans: its tp_size as set or resolved, else 1."""
    row = next((c for c in ctx.configs if c.id == cid), None)
    return (row.resolved().tp_size or 1) if row is not None else 1


def _priced(t: TierAnswer, ctx: StudyContext, price: float | None) -> TierAnswer:
    """The tier's answer with the cost per million output tokens at the winner's knee and the defaults'."""
    if price is None or t.winner_id is None:
        return t
    gpus = _gpus(ctx, t.winner_id)
    mine = usd_per_million_output(price, gpus, t.knee.goodput_tps if t.knee is not None else None)
    dk = t.gain.defaults_knee if t.gain is not None else None
    theirs = (usd_per_million_output(price, _gpus(ctx, t.gain.defaults_id), dk.goodput_tps)
              if t.gain is not None and dk is not None else None)
    return replace(t, gpus=gpus, usd_per_mtok=mine, defaults_usd_per_mtok=theirs)


def _tier_answer(ctx: StudyContext, tier: Tier, wid: int | None, screen_only: bool, knees: Mapping[int, ConfigKnee],
                 pool: Mapping[int, ConfigKnee], judged: Mapping[int, Sequence[LadderStep]], space: Mapping[str, Sequence[KnobValue]]) -> TierAnswer:
    rows = {c.id: c for c in ctx.configs}
    drain = ctx.profile.window.drain_seconds if ctx.profile is not None else None
    bindings = {cid: b for cid, ss in judged.items()
                if (b := binding(ss, knees.get(cid), rows[cid].config, space, resolved=rows[cid].resolved(),
                                 drain_s=drain)) is not None}
    base = sorted(defaults_ids(ctx.configs) & set(judged))
    gain = None
    if base:
        did = next((i for i in base if i in knees), base[-1])
        dk = knees.get(did)
        diff = difference(knees[wid], dk) if wid is not None and dk is not None else None
        gain = Gain(did, dk, diff, wid == did)
    knee = knees.get(wid) if wid is not None else None
    config = rows[wid].config if wid is not None else ServerConfig()
    mine = list(judged.get(wid, ())) if wid is not None else []
    same = tuple(cid for cid in pool if wid is not None and cid != wid and same_windows(mine, judged.get(cid, ())))
    label = _label(ctx.configs, wid, ctx.labels) if wid is not None else ""
    if same and wid is not None:
        label = same_label(ctx.configs, [wid, *same])
    return TierAnswer(
        tier.name, tier.primary, tier.bounds(), wid, label, config.knobs(), knee, screen_only,
        _bracket(mine, knee) if knee is not None and wid is not None else None,
        _shape(knee), gain, bindings.get(wid) if wid is not None else None,
        bindings, win_probabilities(wid, pool) if wid is not None else {},
        tuple(c for c in ties(wid, pool) if c not in same), dict(knees), same,
        knee is not None and _at_top(mine, knee))



def winner_records(answer: Answer, decision: WinnerDecision | None) -> list[WinnerRecord]:
    """The rows of study_winners, one per tier of `answer` (a "default" row when the stored profile no longer
    validates): the primary tier's winner is the read model's `decision.named`, the same fact the report, the page
    and the terminal name; each row has the knee, its goodput interval (output tok/s, goodput's unit) and the
    binding constraint, or no configuration and why none is named."""
    named = decision.named if decision is not None else None
    none_why = decision.why_none() if decision is not None else "the study's winner was never decided"
    if not answer.tiers:  # another version's profile: the read model's decision alone, as the "default" tier
        if named is None:
            return [WinnerRecord("default", True, why=none_why)]
        k = named.knee
        return [WinnerRecord("default", True, named.id, answer.labels.get(named.id, str(named.id)),
                             json.dumps(named.config.knobs(), sort_keys=True), k.phase, k.concurrency, k.goodput_tps,
                             k.ci_low, k.ci_high)]
    out = []
    for t in answer.tiers:
        wid = None if named is None else named.id if t.primary else t.winner_id
        knee = t.knees.get(wid) if wid is not None else None
        if t.primary and named is not None:
            knee = named.knee  # the read model's: the report, the page and the terminal name this one
        if wid is None or knee is None:
            why = none_why if named is None else (answer.note or "no configuration passed this tier's SLA at any step")
            out.append(WinnerRecord(t.tier, t.primary, why=why))
            continue
        b = t.bindings.get(wid)
        out.append(WinnerRecord(t.tier, t.primary, wid, answer.labels.get(wid, str(wid)),
                                json.dumps(dict(t.knobs), sort_keys=True), knee.phase, knee.concurrency,
                                knee.goodput_tps, knee.ci_low, knee.ci_high, b.line() if b is not None else None))
    return out
