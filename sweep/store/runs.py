"""The store's writes of an attempt's runs (measured windows): create, store a window, mark, abort; and the lease
check every write of an attempt makes (fencing). `Store` is this class plus the reads and the other writes."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager

from sqlalchemy import (
    ColumnElement,
    Connection,
    Insert,
    Table,
    Update,
    case,
    func,
    insert,
    or_,
    select,
    true,
    update,
)

from sweep.analysis.run_stats import RunStats
from sweep.core.errors import Fenced, StoreError
from sweep.core.types import Placement, RequestRecord, Sample
from sweep.store import queries as q
from sweep.store.models import runs_table
from sweep.store.records import utcnow

# An attempt's lease: its server_configs row is live (pending or running) until its verdict is written or the
# recovery path aborts it (its worker lost, its trial re-queued). Every write of the attempt (its row, its
# runs) checks the lease in the write's own transaction and raises Fenced, writing nothing, once it lapsed.
LIVE_CONFIG = ("pending", "running")


def new_id(conn: Connection, stmt: Insert) -> int:
    """Execute one INSERT and return the new row's primary key."""
    key = conn.execute(stmt).inserted_primary_key
    if key is None:
        raise StoreError("the database returned no id for a new row")
    return int(key[0])


def hold_lease(conn: Connection, config_id: int) -> None:
    """Inside a write transaction: the attempt `config_id` still holds its lease (row locked on PostgreSQL
    until the commit, so the recovery's abort waits for this write); Fenced when it lapsed."""
    t = q.configs_table
    status = conn.execute(select(t.c.status).where(t.c.id == config_id).with_for_update()).scalar_one_or_none()
    if status is None:
        raise StoreError(f"no such server config {config_id}")
    if status not in LIVE_CONFIG:
        raise Fenced(f"configuration {config_id}", f"its row is {status!r}")


def update_run(conn: Connection, run_id: int, values: Mapping[str, object]) -> None:
    """Update a running run: Fenced when the run is no longer running (its attempt was aborted by the
    recovery path), StoreError when there is no such run."""
    r = runs_table.c
    if conn.execute(update(runs_table).where(r.id == run_id, r.status == "running").values(dict(values))).rowcount:
        return
    row = conn.execute(select(r.server_config_id, r.status).where(r.id == run_id)).first()
    if row is None:
        raise StoreError(f"no such run {run_id}")
    raise Fenced(f"configuration {row.server_config_id}", f"its run {run_id} is {row.status!r}")


class RunWrites:
    """The writes of an attempt's measured windows (runs), each fenced by the attempt's lease."""

    @abstractmethod
    def _write(self, action: str) -> AbstractContextManager[Connection]:
        """One write transaction, errors wrapped (Store's)."""

    def create_run(self, study_id: int, server_config_id: int, concurrency: int, fingerprint: str,
                   simulated: bool, driver: str, phase: str = "final", reference_for: int | None = None,
                   placement: Placement | None = None, offered_rps: float | None = None,
                   planned_measure_s: float | None = None, short_window: bool = False) -> int:
        """Insert a running measured window and return its id (reference_for: sweep's run a reference row checks;
        offered_rps: an open-loop rate ladder's offered rate; planned_measure_s: its planned measured length,
        short_window: a far step's short window); Fenced when its attempt no longer holds the lease."""
        row = dict(study_id=study_id, server_config_id=server_config_id, concurrency=int(concurrency),
                   offered_rps=offered_rps, planned_measure_s=planned_measure_s, short_window=short_window,
                   status="running", fingerprint=fingerprint, simulated=bool(simulated), driver=driver,
                   phase=phase, started_at=utcnow(), reference_for_run_id=reference_for,
                   **(placement or Placement()).columns())
        with self._write(f"create run at concurrency {concurrency}") as conn:
            hold_lease(conn, server_config_id)
            return new_id(conn, insert(runs_table).values(row))

    def finish_run(self, run_id: int, stats: RunStats | Mapping[str, object], records: Sequence[RequestRecord],
                   samples: Sequence[Sample], window_start: float, status: str = "completed",
                   reason: str | None = None) -> None:
        """Store a window's stats, requests and samples in one transaction (unknown stat keys raise); Fenced,
        nothing stored, when the run is no longer running (its attempt was aborted: the worker lost its lease)."""
        values = q.stat_values(stats)
        values.update(status=status, reason=reason, finished_at=utcnow())
        request_rows = q.request_rows(run_id, records, window_start)
        sample_rows = q.sample_rows(run_id, samples, window_start)
        with self._write(f"store run {run_id}") as conn:
            update_run(conn, run_id, values)
            # executemany: one prepared statement, batched by the driver (100k rows in about a second)
            if request_rows:
                conn.execute(insert(q.requests_table), request_rows)
            if sample_rows:
                conn.execute(insert(q.samples_table), sample_rows)

    def add_requests(self, run_id: int, records: Sequence[RequestRecord], window_start: float) -> None:
        """Store a batch of a running window's requests (a streamed window flushes them while it runs); Fenced,
        nothing stored, when the run is no longer running or its attempt no longer holds the lease. They count only
        once finish_run completes the run: an aborted or failed run's requests are never a completed run's."""
        rows = q.request_rows(run_id, records, window_start)
        if not rows:
            return
        r = runs_table.c
        with self._write(f"store requests of run {run_id}") as conn:
            row = conn.execute(select(r.server_config_id, r.status).where(r.id == run_id).with_for_update()).first()
            if row is None:
                raise StoreError(f"no such run {run_id}")
            if row.status != "running":
                raise Fenced(f"configuration {row.server_config_id}", f"its run {run_id} is {row.status!r}")
            hold_lease(conn, row.server_config_id)
            conn.execute(insert(q.requests_table), rows)

    def mark_run(self, run_id: int, status: str, reason: str | None) -> None:
        """Set a running run's status and reason (e.g. failed: server died) without stats; Fenced as finish_run."""
        values: dict[str, object] = {"status": status, "reason": reason}
        if status != "running":
            values["finished_at"] = utcnow()
        with self._write(f"mark run {run_id} {status}") as conn:
            update_run(conn, run_id, values)

    def abort_running(self, study_id: int, workers: Sequence[int | None] | None = None) -> int:
        """Mark runs and configs a killed orchestrator left 'running' as 'aborted'; returns how many rows changed.
        The completed steps of such an attempt become 'aborted' too: the configuration is measured again, and
        `sweep runs` / run_summary must not list its first, partial ladder as ordinary completed rows.

        With `workers`, only rows measured by those sweep_workers ids (None: rows that name no worker) change:
        another live worker's running rows are never touched.
        """
        reason = "orchestrator stopped before this finished"
        changed = 0

        def owned(table: Table) -> ColumnElement[bool]:
            """The rows of the given workers (all rows without `workers`)."""
            if workers is None:
                return true()
            ids = [w for w in workers if w is not None]
            return (or_(table.c.worker_id.in_(ids), table.c.worker_id.is_(None)) if None in workers
                    else table.c.worker_id.in_(ids))

        with self._write(f"abort stale runs of study {study_id}") as conn:
            c = q.configs_table
            stale = select(c.c.id).where(c.c.study_id == study_id, c.c.status == "running", owned(c))
            changed += conn.execute(abort_runs(runs_table.c.server_config_id.in_(stale), reason)).rowcount
            for table, why in ((runs_table, "reason"), (q.configs_table, "failure_reason")):
                stmt = (update(table).where(table.c.study_id == study_id, table.c.status == "running", owned(table))
                        .values({"status": "aborted", "finished_at": utcnow(),
                                 why: func.coalesce(table.c[why], reason)}))
                changed += conn.execute(stmt).rowcount
        return changed

    def abort_config(self, config_id: int, reason: str) -> None:
        """An attempt the orchestrator gave up (signal, database or disk error): the configuration and every
        run of it, completed ones included, become 'aborted' with the reason; the resume measures it again.
        Fenced, nothing written, when the attempt's lease already lapsed (another worker aborted it)."""
        with self._write(f"abort server config {config_id}") as conn:
            hold_lease(conn, config_id)
            conn.execute(abort_runs(runs_table.c.server_config_id == config_id, reason))
            t = q.configs_table
            conn.execute(update(t).where(t.c.id == config_id).values(
                status="aborted", failure_reason=reason, finished_at=utcnow()))


def abort_runs(which: ColumnElement[bool], reason: str) -> Update:
    """UPDATE of the running and completed runs matching `which` to 'aborted' (a completed one keeps its stats
    and says in its reason that its attempt was aborted)."""
    r = runs_table.c
    why = case((r.status == "completed", "attempt aborted: " + reason), else_=func.coalesce(r.reason, reason))
    return (update(runs_table).where(which, r.status.in_(("running", "completed")))
            .values(status="aborted", reason=why, finished_at=func.coalesce(r.finished_at, utcnow())))
