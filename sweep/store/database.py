"""The results database: Store, the one writer and the reader for any URL (SQLite by default, PostgreSQL for several hosts).

Store(url) opens any SQLAlchemy URL, migrates it to head with the packaged Alembic scripts (version table
`sweep_alembic_version`, so Optuna's RDB storage can share the database) and offers typed writes and
typed reads (sweep/store/records.py). Every database failure surfaces as a one-line StoreError. Timestamps are naive UTC.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import cast

from sqlalchemy import (
    Connection,
    String,
    Table,
    column,
    delete,
    insert,
    inspect,
    make_url,
    select,
    table,
    update,
)

from sweep.core.environment import Environment as LauncherEnvironment  # what a launcher reports
from sweep.core.errors import StoreError
from sweep.core.types import Placement, ServerConfig
from sweep.store import queries as q
from sweep.store.engine import alembic_config, make_engine
from sweep.store.errors import map_errors
from sweep.store.models import runs_table
from sweep.store.queries import UnknownColumnError
from sweep.store.reads import StoreReads
from sweep.store.records import (
    ConfigRecord,
    PriorRecord,
    StudyRecord,
    WinnerRecord,
    utcnow,
)
from sweep.store.revisions import VERSION_TABLE, check_readable, one_revision
from sweep.store.runs import RunWrites, hold_lease, new_id

__all__ = ["Store", "schema_revision"]

_PG_MIGRATION_LOCK = 0x5357_4545  # pg_advisory_xact_lock key: one migrating worker at a time ("SWEE")
_CONFIG_FIELDS = frozenset(q.configs_table.c.keys()) - {"id", "study_id", "created_at", "argv_json",
                                                          "server_info_json"}
_DONE_CONFIG = frozenset({"completed", "failed", "infeasible", "aborted"})
def schema_revision(conn: Connection) -> str | None:
    """The schema revision stored in the database on `conn` (None: no sweep schema in it yet), read with one query
    of sweep's version table (what Alembic's MigrationContext reads, without loading Alembic)."""
    if not inspect(conn).has_table(VERSION_TABLE):
        return None
    version = column("version_num", String)
    return one_revision([str(r) for r in conn.execute(select(version).select_from(table(VERSION_TABLE))).scalars()])


def _sqlite_file(url: str) -> str | None:
    """The SQLite database file behind `url`; None for another database, memory, or a URL that does not parse."""
    try:
        parsed = make_url(url)
    except Exception:  # noqa: BLE001 - the store's open reports a URL that does not parse, in one line
        return None
    db = parsed.database
    if parsed.get_backend_name() != "sqlite" or not db or db == ":memory:" or db.startswith("file:"):
        return None
    return db


class Store(RunWrites, StoreReads):
    """The results database behind one SQLAlchemy URL, migrated to head on open.

    create=False: a SQLite file that does not exist is refused, not made. readonly=True (the reading commands:
    runs, show, report, compare, explain, serve): never made, never migrated, never switched to WAL; a database at
    another schema revision than this sweep's is refused in one line (an older one: run `sweep db upgrade`), since
    an older sweep refuses a database a newer one has migrated.
    """

    def __init__(self, url: str, create: bool = True, readonly: bool = False) -> None:
        self.url = url
        self._shown = url.split("@")[-1]  # never echo a password, even before the URL has parsed
        self._path = _sqlite_file(url)  # error lines name it with what happened to it
        self.opened_at: str | None = None  # the schema revision the database had when opened (before migrating)
        with self._guard("open the results database"):
            self._shown = make_url(url).render_as_string(hide_password=True)
            self.engine = make_engine(url, create and not readonly, readonly)
            if readonly:
                self._check_revision()
            else:
                self._migrate()

    @property
    def shown(self) -> str:
        """The URL as messages may print it: the password hidden."""
        return self._shown

    def close(self) -> None:
        """Release every pooled connection."""
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        """Turn database and migration failures into a one-line StoreError naming the action (store/errors.py)."""
        with map_errors(f"cannot {action} ({self._shown})", opening=True, path=self._path):
            yield

    @contextmanager
    def _write(self, action: str) -> Iterator[Connection]:
        """One write transaction (BEGIN IMMEDIATE on SQLite), errors wrapped."""
        with self._guard(action), self.engine.connect() as conn:
            conn = conn.execution_options(sqlite_begin="IMMEDIATE")
            with conn.begin():
                yield conn

    @contextmanager
    def _read(self, action: str) -> Iterator[Connection]:
        """One read-only connection, errors wrapped."""
        with self._guard(action), self.engine.connect() as conn:
            yield conn

    def _migrate(self) -> None:
        """Upgrade to head inside one transaction; concurrent openers wait on a lock and then find nothing to do."""
        from alembic import command

        cfg = alembic_config()
        with self.engine.connect() as conn:
            conn = conn.execution_options(sqlite_begin="IMMEDIATE")
            with conn.begin():
                if conn.dialect.name == "postgresql":
                    conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_MIGRATION_LOCK})")
                self.opened_at = schema_revision(conn)
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")

    def revision(self) -> str | None:
        """The database's schema revision now (Alembic's, in sweep's own version table)."""
        with self._read("read the schema revision") as conn:
            return schema_revision(conn)

    def _check_revision(self) -> None:
        """Refuse a database whose schema revision is not this sweep's head (read-only opens: nothing migrates)."""
        with self.engine.connect() as conn:
            current = self.opened_at = schema_revision(conn)
        check_readable(current, self._path or self._shown)

    @staticmethod
    def _update_one(conn: Connection, table: Table, row_id: int, values: Mapping[str, object], what: str) -> None:
        """Update the row `row_id` of `table`; raise when there is none (a wrong id is a caller bug worth hearing
        about)."""
        if conn.execute(update(table).where(table.c.id == row_id).values(dict(values))).rowcount == 0:
            raise StoreError(f"no such {what}")

    # --- studies and environments -------------------------------------------------------------------

    def create_study(self, name: str, profile_name: str, profile_json: str, fingerprint: str, sampler: str,
                     simulated: bool, driver: str, optuna_study_name: str | None) -> int:
        """Insert a running study and return its id."""
        row = dict(name=name, profile_name=profile_name, profile_json=profile_json, fingerprint=fingerprint,
                   sampler=sampler, simulated=bool(simulated), driver=driver, status="running",
                   optuna_study_name=optuna_study_name, created_at=utcnow())
        with self._write(f"create study {name!r}") as conn:
            return new_id(conn, insert(q.studies_table).values(row))

    def get_study_by_name(self, name: str) -> StudyRecord | None:
        """The study row named `name`, or None."""
        with self._read(f"read study {name!r}") as conn:
            return q.study_by_name(conn, name)

    def latest_study(self) -> StudyRecord | None:
        """The most recently created study, or None in an empty database."""
        with self._read("read the latest study") as conn:
            return q.latest_study(conn)

    def finish_study(self, study_id: int, status: str, winner_config_id: int | None = None,
                     report_path: str | None = None) -> None:
        """Set a study's final status (and winner / report path when given) and its finish time."""
        values: dict[str, object] = {"status": status, "finished_at": utcnow()}
        if winner_config_id is not None:
            values["winner_config_id"] = winner_config_id
        if report_path is not None:
            values["report_path"] = str(report_path)
        with self._write(f"finish study {study_id}") as conn:
            self._update_one(conn, q.studies_table, study_id, values, f"study {study_id}")

    def write_winners(self, study_id: int, winners: Sequence[WinnerRecord]) -> None:
        """Replace a study's stored winners (study_winners) with `winners`, one per tier, in one transaction."""
        t = q.winners_table
        now = utcnow()
        with self._write(f"write the winners of study {study_id}") as conn:
            # the workers of a shared study each write them when they find it done: on PostgreSQL their
            # delete-then-insert would race (both delete nothing, the second insert breaks the unique key), so
            # the study's row is locked first; SQLite's writers are serialized already (BEGIN IMMEDIATE)
            self._lock_study(conn, study_id)
            conn.execute(delete(t).where(t.c.study_id == study_id))
            for w in winners:
                conn.execute(insert(t).values({**w.columns(), "study_id": study_id, "written_at": now}))

    def write_prior(self, study_id: int, ranking: Sequence[PriorRecord]) -> None:
        """Store a study's simulated prior (study_priors), replacing any earlier one, in one transaction."""
        t = q.priors_table
        with self._write(f"write the prior of study {study_id}") as conn:
            self._lock_study(conn, study_id)  # as write_winners: workers of one study may write it together
            conn.execute(delete(t).where(t.c.study_id == study_id))
            for r in ranking:
                conn.execute(insert(t).values({**r.columns(), "study_id": study_id}))

    @staticmethod
    def _lock_study(conn: Connection, study_id: int) -> None:
        """Hold the study's row until the transaction ends (SELECT ... FOR UPDATE; a no-op on SQLite)."""
        t = q.studies_table
        conn.execute(select(t.c.id).where(t.c.id == study_id).with_for_update())

    def reopen_study(self, study_id: int) -> None:
        """A resumed study is running again (it may have been left interrupted or failed)."""
        with self._write(f"reopen study {study_id}") as conn:
            self._update_one(conn, q.studies_table, study_id, {"status": "running", "finished_at": None},
                             f"study {study_id}")

    def mark_study_simulated(self, study_id: int) -> None:
        """Label a study (and its runs so far) simulated: its server turned out to be the simulator."""
        with self._write(f"mark study {study_id} simulated") as conn:
            self._update_one(conn, q.studies_table, study_id, {"simulated": True}, f"study {study_id}")
            conn.execute(update(runs_table).where(runs_table.c.study_id == study_id).values(simulated=True))

    def record_environment(self, study_id: int, env: LauncherEnvironment) -> int:
        """Store where a study ran; unknown keys go to extra_json, keys that look like secrets are dropped."""
        with self._write(f"record environment of study {study_id}") as conn:
            stmt = insert(q.environments_table).values(q.environment_row(study_id, env))
            return new_id(conn, stmt)

    # --- server configurations ----------------------------------------------------------------------

    def create_server_config(self, study_id: int, config: ServerConfig, launcher: str, argv: Sequence[str],
                             trial_number: int | None, placement: Placement | None = None) -> int:
        """Insert a pending server configuration (credentials in argv redacted) and return its id."""
        row = dict(study_id=study_id, trial_number=trial_number, config_key=config.key(), **config.columns(),
                   flags_json=config.flags_json(),
                   launcher=launcher, argv_json=json.dumps(q.redact_argv(argv)), status="pending",
                   created_at=utcnow(), **(placement or Placement()).columns())
        with self._write(f"create server config {config.label()!r}") as conn:
            return new_id(conn, insert(q.configs_table).values(row))

    def update_server_config(self, config_id: int, **fields: object) -> None:
        """Set columns of a configuration; server_info (dict) and argv (list) are stored as JSON."""
        self._update_config(config_id, fields, held=False)

    def _update_config(self, config_id: int, fields: Mapping[str, object], held: bool) -> None:
        values = {k: v for k, v in fields.items() if k not in ("server_info", "argv")}
        unknown = sorted(set(values) - _CONFIG_FIELDS)
        if unknown:
            raise UnknownColumnError(f"unknown server_configs field(s): {', '.join(unknown)}")
        if "server_info" in fields:
            info = fields["server_info"]
            values["server_info_json"] = None if info is None else json.dumps(q.drop_secrets(info), default=str)
        if "argv" in fields:
            values["argv_json"] = json.dumps(q.redact_argv(cast(Sequence[str], fields["argv"] or [])))
        if values.get("status") in _DONE_CONFIG and "finished_at" not in values:
            values["finished_at"] = utcnow()
        if not values:
            return
        with self._write(f"update server config {config_id}") as conn:
            if held:
                hold_lease(conn, config_id)
            self._update_one(conn, q.configs_table, config_id, values, f"server config {config_id}")

    def update_attempt(self, config_id: int, **fields: object) -> None:
        """update_server_config by the worker measuring the attempt: written only while it holds the lease
        (the row is pending or running), else Fenced and nothing written."""
        self._update_config(config_id, fields, held=True)

    def server_configs(self, study_id: int) -> list[ConfigRecord]:
        """Every server configuration of a study, in creation order."""
        with self._read(f"read server configs of study {study_id}") as conn:
            return q.server_configs(conn, study_id)

    def find_server_config(self, study_id: int, config_key: str) -> ConfigRecord | None:
        """The latest configuration of a study with this knob key (ServerConfig.key()), or None."""
        with self._read(f"find server config {config_key}") as conn:
            return q.find_server_config(conn, study_id, config_key)

    # --- study workers ------------------------------------------------------------------------------

    def register_worker(self, study_id: int, label: str, host: str, pid: int, process_started: float,
                        gpus: str | None, sweep_version: str, fingerprint: str) -> int:
        """Insert a running study worker and return its id."""
        row = dict(study_id=study_id, label=label, host=host, pid=pid, process_started=process_started, gpus=gpus,
                   sweep_version=sweep_version, fingerprint=fingerprint, status="running", started_at=utcnow())
        with self._write(f"register worker {label!r}") as conn:
            return new_id(conn, insert(q.workers_table).values(row))

    def set_worker_status(self, worker_id: int, status: str) -> None:
        """A worker finished (done), was found dead (lost), or is running again (a fenced worker that woke)."""
        values: dict[str, object] = {"status": status, "finished_at": None if status == "running" else utcnow()}
        with self._write(f"mark worker {worker_id} {status}") as conn:
            self._update_one(conn, q.workers_table, worker_id, values, f"worker {worker_id}")

