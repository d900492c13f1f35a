"""Row builders (Python objects → column dicts) and the read queries behind Store; all take a Connection."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from datetime import datetime

from sqlalchemy import Column, Connection, Executable, MetaData, Table, case, func, select

from sweep.analysis.run_stats import RunStats
from sweep.core.environment import Environment as LauncherEnvironment  # what a launcher reports
from sweep.core.errors import StoreError
from sweep.core.numbers import as_float, as_int
from sweep.core.types import RequestRecord, Sample
from sweep.store.environment_record import EnvironmentRecord
from sweep.store.models import (
    KNOB_COLUMNS,
    PLACEMENT_COLUMNS,
    STAT_COLUMNS,
    STAT_TYPES,
    WINDOW_COLUMNS,
    Base,
    Environment,
    RequestRow,
    SampleRow,
    ServerConfigRow,
    Study,
    StudyPriorRow,
    StudyWinnerRow,
    Worker,
    runs_table,
)
from sweep.store.records import (
    ConfigRecord,
    PriorRecord,
    RunRecord,
    RunSummary,
    StoredRequestRow,
    StudyRecord,
    WinnerRecord,
    as_utc,
)

studies_table = Base.metadata.tables[Study.__tablename__]
environments_table = Base.metadata.tables[Environment.__tablename__]
configs_table = Base.metadata.tables[ServerConfigRow.__tablename__]
requests_table = Base.metadata.tables[RequestRow.__tablename__]
samples_table = Base.metadata.tables[SampleRow.__tablename__]
workers_table = Base.metadata.tables[Worker.__tablename__]
winners_table = Base.metadata.tables[StudyWinnerRow.__tablename__]
priors_table = Base.metadata.tables[StudyPriorRow.__tablename__]

# The run_summary view (created by the migration), typed so booleans and timestamps come back as such.
_RUN_HEAD = ("concurrency", "offered_rps", "phase", "status", "reason", "simulated", "driver", "fingerprint", "started_at",
             "finished_at", *WINDOW_COLUMNS)
run_summary = Table(
    "run_summary",
    MetaData(),
    Column("run_id", runs_table.c.id.type),
    Column("study_name", studies_table.c.name.type),
    Column("profile_name", studies_table.c.profile_name.type),
    Column("study_id", runs_table.c.study_id.type),
    Column("server_config_id", runs_table.c.server_config_id.type),
    Column("trial_number", configs_table.c.trial_number.type),
    Column("config_key", configs_table.c.config_key.type),
    *(Column(k, configs_table.c[k].type) for k in KNOB_COLUMNS),
    Column("launcher", configs_table.c.launcher.type),
    Column("config_status", configs_table.c.status.type),
    *(Column(c, runs_table.c[c].type) for c in (*_RUN_HEAD, *(c for c in STAT_COLUMNS if c not in WINDOW_COLUMNS),
                                                *PLACEMENT_COLUMNS)),
    Column("flags_json", configs_table.c.flags_json.type),
)

_SECRET_WORDS = ("key", "token", "secret", "password")
# A launch flag whose last word names a credential: --api-key, --admin-api-key, --hf-token (not --tokenizer-path).
_SECRET_FLAG = re.compile(r"^--?(?:[\w-]*-)?(?:api-key|key|token|secret|password)$")
REDACTED = "***"


def redact_argv(argv: Iterable[str]) -> list[str]:
    """argv with the value of every credential flag (--api-key X, --api-key=X) replaced by ***."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        flag, eq, _ = arg.partition("=")
        if hide_next and not arg.startswith("--"):
            out.append(REDACTED)
        elif eq and _SECRET_FLAG.match(flag):
            out.append(f"{flag}={REDACTED}")
        else:
            out.append(arg)
        hide_next = not eq and bool(_SECRET_FLAG.match(arg))
    return out


def drop_secrets(value: object) -> object:
    """A copy of value without dict entries whose key mentions key/token/secret/password, at any depth."""
    if isinstance(value, Mapping):
        return {k: drop_secrets(v) for k, v in value.items()
                if not any(word in str(k).lower() for word in _SECRET_WORDS)}
    if isinstance(value, list | tuple):
        return [drop_secrets(v) for v in value]
    return value


def environment_row(study_id: int, env: LauncherEnvironment) -> dict[str, object]:
    """Column values for one environment: known keys as columns, the rest as extra_json, secrets dropped."""
    clean = drop_secrets(env)
    items = list(clean.items()) if isinstance(clean, dict) else []  # a mapping in, a dict out
    columns = set(environments_table.c.keys()) - {"id", "study_id", "extra_json"}
    row = {k: v for k, v in items if k in columns}
    extra = {k: v for k, v in items if k not in columns}
    row.update(study_id=study_id, simulated=bool(row.get("simulated", False)),
               extra_json=json.dumps(extra, sort_keys=True, default=str) if extra else None)
    return row


def _plain(value: object, kind: type) -> object:
    """value coerced to a driver-safe Python type (numpy scalars, NaN → None, list of failures → text)."""
    if value is None:
        return None
    if kind is str:
        return "; ".join(map(str, value)) if isinstance(value, list | tuple) else str(value)
    if kind is float:
        number = as_float(value)
        return None if math.isnan(number) else number
    return kind(value)


def stat_values(stats: RunStats | Mapping[str, object]) -> dict[str, object]:
    """The runs columns for one window's stats (a mapping: an outside client's partial row); unknown keys raise."""
    values = stats.columns() if isinstance(stats, RunStats) else stats
    unknown = sorted(set(values) - set(STAT_COLUMNS))
    if unknown:
        raise UnknownColumnError(f"unknown stat column(s) for runs: {', '.join(unknown)}")
    return {k: _plain(v, STAT_TYPES[k]) for k, v in values.items()}


def _ms(value: float | None) -> float | None:
    """A latency in ms as a plain float, or None."""
    return None if value is None else float(value)


def request_rows(run_id: int, records: Iterable[RequestRecord], window_start: float) -> list[dict[str, object]]:
    """One requests row per record; latencies as measure defines them, times relative to window_start."""
    from sweep.analysis import measure  # numpy and the profile: the write path only, not a reading command

    return [{
        "run_id": run_id, "idx": int(r.index), "warmup": bool(r.warmup), "modality": r.modality,
        "scheduled_at": float(r.scheduled_at - window_start), "sent_at": float(r.sent_at - window_start),
        "ttft_ms": _ms(measure.ttft_ms(r)), "tpot_ms": _ms(measure.tpot_ms(r)), "e2e_ms": _ms(measure.e2e_ms(r)),
        "prompt_tokens": int(r.prompt_tokens), "output_tokens": int(r.output_tokens),
        "sent_prompt_tokens": int(r.sent_prompt_tokens) if r.sent_prompt_tokens else None,
        "sent_output_tokens": int(r.sent_output_tokens) if r.sent_output_tokens else None,
        "cached_tokens": int(r.cached_tokens), "num_retractions": int(r.num_retractions),
        "error": r.error, "error_kind": r.error_kind,
        "turn": r.turn, "branch": r.branch, "context_tokens": r.context_tokens if r.turn is not None else None,
        "session_turns": r.session_turns,
    } for r in records]


def sample_rows(run_id: int, samples: Iterable[Sample], window_start: float) -> list[dict[str, object]]:
    """One samples row per probe reading, t relative to window_start."""
    return [{"run_id": run_id, "t": float(s.t - window_start), "source": s.source, "name": s.name,
             "value": float(s.value), "labels": s.labels} for s in samples]


class UnknownColumnError(StoreError, ValueError):
    """A caller passed a field the table does not have (a bug in the caller, not in the database)."""


def _rows(conn: Connection, stmt: Executable) -> list[Mapping[str, object]]:
    """Rows of a statement as mappings (column name -> value)."""
    return [dict(row) for row in conn.execute(stmt).mappings()]


def _first(conn: Connection, stmt: Executable) -> Mapping[str, object] | None:
    """The first row of a statement as a mapping, or None."""
    row = conn.execute(stmt).mappings().first()
    return None if row is None else dict(row)


def study_by_name(conn: Connection, name: str) -> StudyRecord | None:
    """The study row named `name`, or None."""
    row = _first(conn, select(studies_table).where(studies_table.c.name == name))
    return None if row is None else StudyRecord.from_row(row)


def studies(conn: Connection, profile: str | None = None, fingerprint: str | None = None) -> list[StudyRecord]:
    """The studies of one profile name and/or one workload fingerprint (every study with neither), oldest first."""
    t = studies_table.c
    stmt = select(studies_table).order_by(t.created_at, t.id)
    if profile is not None:
        stmt = stmt.where(t.profile_name == profile)
    if fingerprint is not None:
        stmt = stmt.where(t.fingerprint == fingerprint)
    return [StudyRecord.from_row(r) for r in _rows(conn, stmt)]


def latest_study(conn: Connection) -> StudyRecord | None:
    """The most recently created study, or None in an empty database."""
    row = _first(conn, select(studies_table).order_by(studies_table.c.id.desc()).limit(1))
    return None if row is None else StudyRecord.from_row(row)


def completed_runs(conn: Connection, study_id: int, server_config_id: int | None = None) -> list[RunRecord]:
    """Completed runs of a study (optionally one configuration), oldest first."""
    stmt = select(runs_table).where(runs_table.c.study_id == study_id, runs_table.c.status == "completed",
                                    runs_table.c.reference_for_run_id.is_(None))
    if server_config_id is not None:
        stmt = stmt.where(runs_table.c.server_config_id == server_config_id)
    return [RunRecord.from_row(r) for r in _rows(conn, stmt.order_by(runs_table.c.id))]


def list_runs(conn: Connection, study: str | None = None, profile: str | None = None,
              since: datetime | None = None, status: str | None = None,
              limit: int | None = None) -> list[RunSummary]:
    """run_summary rows matching every given filter, newest first."""
    v = run_summary.c
    stmt = select(run_summary)
    if study is not None:
        stmt = stmt.where(v.study_name == study)
    if profile is not None:
        stmt = stmt.where(v.profile_name == profile)
    if since is not None:
        stmt = stmt.where(v.started_at >= as_utc(since))
    if status is not None:
        stmt = stmt.where(v.status == status)
    stmt = stmt.order_by(v.started_at.desc(), v.run_id.desc())
    if limit is not None:
        stmt = stmt.limit(limit)
    return [RunSummary.from_row(row) for row in _rows(conn, stmt)]


def get_run(conn: Connection, run_id: int) -> RunSummary | None:
    """One run_summary row plus request_count, warmup_count and sample_count, or None."""
    found = _first(conn, select(run_summary).where(run_summary.c.run_id == run_id))
    if found is None:
        return None
    row = dict(found)
    r = requests_table.c
    row["request_count"], row["warmup_count"] = conn.execute(
        select(func.count(), func.coalesce(func.sum(case((r.warmup, 1), else_=0)), 0))
        .where(r.run_id == run_id)).one()
    row["sample_count"] = conn.execute(
        select(func.count()).select_from(samples_table).where(samples_table.c.run_id == run_id)).scalar_one()
    return RunSummary.from_row(row)


def requests_for_run(conn: Connection, run_id: int) -> list[StoredRequestRow]:
    """Every request row of a run, in send order."""
    r = requests_table.c
    return [StoredRequestRow.from_row(row) for row in
            _rows(conn, select(requests_table).where(r.run_id == run_id).order_by(r.sent_at, r.id))]


RequestTokens = tuple[str, int | None, int, int | None, int, str | None]


def study_request_tokens(conn: Connection, study_id: int) -> list[RequestTokens]:
    """(modality, sent_prompt_tokens, prompt_tokens, sent_output_tokens, output_tokens, error) of every measured
    (not warm-up) request of the study's completed runs."""
    r, q = runs_table.c, requests_table.c
    stmt = (select(q.modality, q.sent_prompt_tokens, q.prompt_tokens, q.sent_output_tokens, q.output_tokens, q.error)
            .join(runs_table, r.id == q.run_id)
            .where(r.study_id == study_id, r.status == "completed", q.warmup.is_(False)))
    return [(str(m), sp, int(p), so, int(o), e) for m, sp, p, so, o, e in conn.execute(stmt)]


def _sample(row: Mapping[str, object]) -> Sample:
    return Sample(as_float(row["t"]), str(row["source"]), str(row["name"]), as_float(row["value"]),
                  str(row.get("labels") or ""))


def samples_for_run(conn: Connection, run_id: int, name: str | None = None) -> list[Sample]:
    """Probe samples of a run (optionally one metric name), in time order (t from the window start)."""
    s = samples_table.c
    stmt = select(samples_table).where(s.run_id == run_id)
    if name is not None:
        stmt = stmt.where(s.name == name)
    return [_sample(row) for row in _rows(conn, stmt.order_by(s.t, s.id))]


def server_configs(conn: Connection, study_id: int) -> list[ConfigRecord]:
    """Every server configuration of a study, in creation order."""
    c = configs_table.c
    return [ConfigRecord.from_row(r) for r in
            _rows(conn, select(configs_table).where(c.study_id == study_id).order_by(c.id))]


def find_server_config(conn: Connection, study_id: int, config_key: str) -> ConfigRecord | None:
    """The latest configuration of a study with this knob key, or None."""
    c = configs_table.c
    row = _first(conn, select(configs_table).where(c.study_id == study_id, c.config_key == config_key)
                 .order_by(c.id.desc()))
    return None if row is None else ConfigRecord.from_row(row)


def study_by_id(conn: Connection, study_id: int) -> StudyRecord | None:
    """One study row by id."""
    row = _first(conn, select(studies_table).where(studies_table.c.id == study_id))
    return None if row is None else StudyRecord.from_row(row)


def study_runs(conn: Connection, study_id: int) -> list[RunRecord]:
    """Every run of a study, whatever its status, in creation order (reference-client rows left out)."""
    t = runs_table.c
    return [RunRecord.from_row(r) for r in
            _rows(conn, select(runs_table).where(t.study_id == study_id, t.reference_for_run_id.is_(None))
                  .order_by(t.id))]


def reference_runs(conn: Connection, study_id: int) -> list[RunRecord]:
    """The cross-check reference-client rows of a study (each names sweep's run in reference_for_run_id)."""
    t = runs_table.c
    return [RunRecord.from_row(r) for r in
            _rows(conn, select(runs_table).where(t.study_id == study_id, t.reference_for_run_id.is_not(None))
                  .order_by(t.id))]


def environment(conn: Connection, study_id: int) -> EnvironmentRecord | None:
    """The latest environment recorded for a study, its extra_json read back."""
    t = environments_table
    found = _first(conn, select(t).where(t.c.study_id == study_id).order_by(t.c.id.desc()).limit(1))
    return None if found is None else EnvironmentRecord.from_row(found)


def histogram_samples(conn: Connection, study_id: int, source: str) -> list[tuple[int, Sample]]:
    """Every sample of `source` (the window histograms) of a study's runs, with its run_id."""
    sm, r = samples_table.c, runs_table.c
    stmt = (select(samples_table).join(runs_table, r.id == sm.run_id)
            .where(r.study_id == study_id, sm.source == source).order_by(sm.run_id, sm.id))
    return [(as_int(row["run_id"]), _sample(row)) for row in _rows(conn, stmt)]


def study_winners(conn: Connection, study_id: int) -> list[WinnerRecord]:
    """A study's stored winners, the primary tier first (empty until the study has ended)."""
    t = winners_table.c
    return [WinnerRecord.from_row(r) for r in
            _rows(conn, select(winners_table).where(t.study_id == study_id).order_by(t.is_primary.desc(), t.id))]


def study_prior(conn: Connection, study_id: int) -> list[PriorRecord]:
    """A study's simulated prior (search.prior: sim), best-ranked first (empty: no prior was used)."""
    t = priors_table.c
    return [PriorRecord.from_row(r) for r in
            _rows(conn, select(priors_table).where(t.study_id == study_id).order_by(t.rank))]
