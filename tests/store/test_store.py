"""The results database: migrations, round trips, filters, resume, secrets, and sharing with Optuna."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import sqlite3
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text

from sweep.analysis import measure
from sweep.analysis.run_stats import ClientStats, RunStats
from sweep.core.environment import Environment
from sweep.core.errors import StoreError
from sweep.core.types import RequestRecord, Sample, ServerConfig
from sweep.store import STAT_COLUMNS, Store, alembic_config
from sweep.store.environment_record import DatasetFit, TraceTiming
from sweep.store.models import Base
from sweep.store.queries import run_summary
from sweep.store.revisions import VERSION_TABLE
from tests.pgdb import fresh_database

TABLES = {"sweep_studies", "environments", "server_configs", "runs", "requests", "samples", "sweep_workers"}
PG_URL = os.environ.get("SWEEP_TEST_PG_URL")
HEAD = ScriptDirectory.from_config(alembic_config()).get_current_head()  # the newest migration's revision


def _schema_diff(conn: Any) -> list[Any]:
    """What autogenerate would change to make our tables match the models (Optuna's tables ignored)."""
    ctx = MigrationContext.configure(conn, opts={
        "compare_type": True, "version_table": VERSION_TABLE,
        "include_name": lambda name, type_, parent: type_ != "table" or name in Base.metadata.tables})
    return list(compare_metadata(ctx, Base.metadata))


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "nested" / "results.db"


@pytest.fixture
def store(db_path: Path) -> Any:
    s = Store(f"sqlite:///{db_path}")
    yield s
    s.close()


def _study(store: Store, name: str | None = None, profile: str = "interactive") -> int:
    return store.create_study(name or f"study-{uuid.uuid4().hex[:8]}", profile, '{"sla": {}}', "fp1", "tpe",
                              True, "virtual", "optuna-" + profile)


def _record(i: int, t0: float = 1000.0, **kw: Any) -> RequestRecord:
    sent = t0 + i * 0.5
    base: dict[str, Any] = dict(index=i, concurrency=16, scheduled_at=sent, sent_at=sent + 0.001,
                                first_token_at=sent + 0.2, finished_at=sent + 1.2,
                                chunk_times=[sent + 0.2, sent + 0.7, sent + 1.1], chunk_tokens=[1, 5, 5],
                                prompt_tokens=100, output_tokens=11, cached_tokens=40, modality="text")
    base.update(kw)
    return RequestRecord(**base)


def _stats(**kw: Any) -> dict[str, Any]:
    stats: dict[str, Any] = {name: None for name in STAT_COLUMNS}
    stats.update(n_started=3, n_completed=2, n_errors=1, error_rate=1 / 3, ttft_p99_ms=200.0, goodput_rps=0.5,
                 passes_sla=True, steady=False, client_bound=False, sla_failures="",
                 window_s=60.0, warmup_requests=1, warmup_s=0.0)
    stats.update(kw)
    return stats


def _round_trip(store: Store) -> None:
    """Write a study, environment, config, run, requests and samples; read every piece back."""
    name = f"rt-{uuid.uuid4().hex[:8]}"
    sid = _study(store, name)
    first = store.get_study_by_name(name)
    assert first is not None and first.id == sid
    assert store.get_study_by_name("no-such-study") is None
    env_id = store.record_environment(sid, cast(Environment, {"host": "h1", "gpu_name": "H200", "gpu_count": 1,
                                                              "simulated": True, "numa": {"nodes": 2}}))
    assert env_id > 0

    config = ServerConfig(max_running_requests=32, mem_fraction_static=0.8, chunked_prefill_size=8192,
                          schedule_policy="lpm")
    cid = store.create_server_config(sid, config, "sim", ["--port", "30000"], trial_number=3)
    store.update_server_config(cid, status="running", startup_s=1.5, server_info={"version": "0.5.17"})
    found = store.find_server_config(sid, config.key())
    assert found is not None and found.id == cid
    assert store.find_server_config(sid, "nope") is None

    rid = store.create_run(sid, cid, 16, "fp1", True, "virtual", phase="screen")
    records = [_record(0, warmup=True), _record(1), _record(2), _record(3, error="boom", error_kind="status",
                                                                         first_token_at=None, finished_at=None)]
    samples = [Sample(1000.5, "metrics", "num_queue_reqs", 2.0), Sample(1001.0, "gpu", "gpu_mem_used_mib", 70000.0,
                                                                       "gpu=0")]
    store.finish_run(rid, _stats(), records, samples, window_start=1000.5)
    store.update_server_config(cid, status="completed", stop_reason="ladder done")
    store.finish_study(sid, "completed", winner_config_id=cid, report_path="reports/x.md")

    study = store.get_study_by_name(name)
    assert study is not None
    assert (study.get("status"), study.get("winner_config_id"), study.get("report_path")) == ("completed", cid, "reports/x.md")
    assert study.get("simulated") is True and study.get("finished_at") is not None

    [cfg] = store.server_configs(sid)
    assert (cfg.get("status"), cfg.get("trial_number"), cfg.get("schedule_policy")) == ("completed", 3, "lpm")
    assert cfg.server_info_json is not None and json.loads(cfg.server_info_json) == {"version": "0.5.17"}
    assert cfg.finished_at is not None

    run = store.get_run(rid)
    assert run is not None
    assert (run.get("id"), run.get("study_name"), run.get("profile_name"), run.get("phase"), run.get("status")) == (
        rid, name, "interactive", "screen", "completed")
    assert (run.get("max_running_requests"), run.get("mem_fraction_static"), run.get("chunked_prefill_size")) == (32, 0.8, 8192)
    assert (run.get("request_count"), run.get("warmup_count"), run.get("sample_count")) == (4, 1, 2)
    assert run.get("passes_sla") is True and run.get("steady") is False
    assert run.get("n_started") == 3 and run.get("error_rate") == pytest.approx(1 / 3) and run.get("window_s") == 60.0
    assert isinstance(run.get("started_at"), datetime)

    rows = store.requests_for_run(rid)
    assert [r.get("idx") for r in rows] == [0, 1, 2, 3]
    assert rows[0].get("warmup") is True and rows[1].get("warmup") is False
    assert rows[1].get("sent_at") == pytest.approx(0.001)  # relative to the window start
    assert rows[1].get("ttft_ms") == pytest.approx(measure.ttft_ms(records[1]))
    assert rows[1].get("tpot_ms") == pytest.approx(90.0)  # (1.1 - 0.2) s / 10 gaps
    assert rows[1].get("e2e_ms") == pytest.approx(1200.0)
    assert (rows[3].get("error"), rows[3].get("error_kind"), rows[3].get("ttft_ms"), rows[3].get("e2e_ms")) == (
        "boom", "status", None, None)
    assert rows[1].get("cached_tokens") == 40 and rows[1].get("prompt_tokens") == 100

    got = store.samples_for_run(rid)
    assert [(s.name, s.t) for s in got] == [("num_queue_reqs", 0.0), ("gpu_mem_used_mib", 0.5)]
    assert store.samples_for_run(rid, name="gpu_mem_used_mib")[0].labels == "gpu=0"
    assert [r.get("id") for r in store.completed_runs(sid)] == [rid]
    assert store.completed_runs(sid, server_config_id=cid + 1000) == []


def test_fresh_sqlite_file_gets_tables_view_wal_and_own_version_table(store: Store, db_path: Path) -> None:
    assert db_path.exists()  # the parent folder was created
    insp = inspect(store.engine)
    tables = set(insp.get_table_names())
    assert TABLES | {"sweep_alembic_version"} <= tables
    assert "alembic_version" not in tables
    assert "run_summary" in insp.get_view_names()
    with sqlite3.connect(db_path) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert raw.execute("SELECT version_num FROM sweep_alembic_version").fetchall() == [(HEAD,)]
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    assert {ix["column_names"][0] for ix in insp.get_indexes("requests")} == {"run_id"}
    assert ["run_id", "name"] in [ix["column_names"] for ix in insp.get_indexes("samples")]


def test_migration_builds_exactly_the_schema_the_models_describe(store: Store) -> None:
    with store.engine.connect() as conn:
        assert _schema_diff(conn) == []


def test_run_summary_view_has_the_columns_queries_read(store: Store) -> None:
    view_columns = [c.get("name") for c in inspect(store.engine).get_columns("run_summary")]
    assert view_columns == [c.name for c in run_summary.columns]
    assert set(STAT_COLUMNS) <= set(view_columns)


def test_stat_columns_are_exactly_the_fields_of_run_stats() -> None:
    own = [f.name for f in dataclasses.fields(RunStats) if f.name != "client"]
    assert sorted(STAT_COLUMNS) == sorted(own + [f.name for f in dataclasses.fields(ClientStats)])


def test_round_trip_on_sqlite(store: Store) -> None:
    _round_trip(store)


def test_list_runs_filters_by_study_profile_since_and_status(store: Store) -> None:
    a, b = _study(store, "alpha", "interactive"), _study(store, "beta", "throughput")
    ca = store.create_server_config(a, ServerConfig(16), "sim", [], 0)
    cb = store.create_server_config(b, ServerConfig(64), "sim", [], 0)
    old = store.create_run(a, ca, 16, "fp1", True, "virtual")
    done = store.create_run(a, ca, 32, "fp1", True, "virtual")
    other = store.create_run(b, cb, 16, "fp1", True, "virtual")
    store.finish_run(done, _stats(), [], [], 0.0)
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE runs SET started_at = :t WHERE id = :id"),
                     {"t": datetime(2020, 1, 1), "id": old})

    def ids(**kw: Any) -> list[int]:
        return [r.run.id for r in store.list_runs(**kw)]

    assert ids() == [other, done, old]  # newest first
    assert ids(study="alpha") == [done, old]
    assert ids(profile="throughput") == [other]
    assert ids(status="completed") == [done]
    assert ids(since=datetime.now(UTC) - timedelta(hours=1)) == [other, done]  # aware `since` is converted
    assert ids(since=datetime(2019, 6, 1), study="alpha", status="running") == [old]
    assert ids(limit=1) == [other]
    assert ids(study="gamma") == []


def test_unknown_stat_key_raises_and_stores_nothing(store: Store) -> None:
    sid = _study(store)
    rid = store.create_run(sid, store.create_server_config(sid, ServerConfig(), "sim", [], None), 16, "fp",
                           True, "virtual")
    with pytest.raises(StoreError, match="ttft_p42_ms"):
        store.finish_run(rid, _stats(ttft_p42_ms=1.0), [_record(0)], [], 1000.0)
    with pytest.raises(ValueError):
        store.update_server_config(1, colour="blue")
    run = store.get_run(rid)
    assert run is not None and run.get("status") == "running" and run.get("request_count") == 0


def test_numpy_values_and_nan_are_stored_as_plain_values(store: Store) -> None:
    np = pytest.importorskip("numpy")
    sid = _study(store)
    rid = store.create_run(sid, store.create_server_config(sid, ServerConfig(), "sim", [], None), 16, "fp",
                           True, "virtual")
    store.finish_run(rid, _stats(n_started=np.int64(7), passes_sla=np.bool_(False), goodput_rps_ci_low=float("nan"),
                                 sla_failures=["TTFT P95 1200 ms > 1000 ms", "errors 2%"]), [], [], 0.0)
    run = store.get_run(rid)
    assert run is not None
    assert (run.get("n_started"), run.get("passes_sla"), run.get("goodput_rps_ci_low")) == (7, False, None)
    assert run.get("sla_failures") == "TTFT P95 1200 ms > 1000 ms; errors 2%"


def test_abort_running_marks_what_a_killed_orchestrator_left_behind(store: Store) -> None:
    sid, other = _study(store), _study(store)
    cid = store.create_server_config(sid, ServerConfig(32), "sim", [], 0)
    store.update_server_config(cid, status="running")
    finished = store.create_run(sid, cid, 16, "fp", True, "virtual")
    store.finish_run(finished, _stats(), [], [], 0.0)
    stale = store.create_run(sid, cid, 32, "fp", True, "virtual")
    ocid = store.create_server_config(other, ServerConfig(32), "sim", [], 0)
    untouched = store.create_run(other, ocid, 16, "fp", True, "virtual")

    assert store.abort_running(sid) == 3  # two runs (the finished step of the attempt too), one config
    assert store.abort_running(sid) == 0
    stale_row = store.get_run(stale)
    assert stale_row is not None and stale_row.get("status") == "aborted" and stale_row.get("finished_at") is not None
    assert stale_row.run.reason is not None and "orchestrator stopped" in stale_row.run.reason
    # The attempt's finished step keeps its stats but is no ordinary completed row: the configuration is redone.
    done_row = store.get_run(finished)
    assert done_row is not None and done_row.get("status") == "aborted" and done_row.get("n_started") is not None
    assert done_row.run.reason is not None and done_row.run.reason.startswith("attempt aborted: ")
    untouched_row = store.get_run(untouched)
    assert untouched_row is not None and untouched_row.run.status == "running"
    assert store.server_configs(sid)[0].get("status") == "aborted"


def test_api_key_is_stripped_from_stored_argv(store: Store) -> None:
    sid = _study(store)
    argv = ["python", "-m", "sglang.launch_server", "--api-key", "sk-secret", "--tokenizer-path", "tok",
            "--admin-api-key=adm1n", "--port", "30000"]
    cid = store.create_server_config(sid, ServerConfig(), "sglang", argv, None)
    stored = store.server_configs(sid)[0].argv
    assert "sk-secret" not in " ".join(stored) and "adm1n" not in " ".join(stored)
    assert list(stored) == ["python", "-m", "sglang.launch_server", "--api-key", "***", "--tokenizer-path",
                            "tok", "--admin-api-key=***", "--port", "30000"]
    store.update_server_config(cid, argv=["--api-key", "again", "--port", "1"])
    assert list(store.server_configs(sid)[0].argv) == ["--api-key", "***", "--port", "1"]


def test_environment_keeps_unknown_keys_as_extra_and_drops_secrets(store: Store) -> None:
    sid = _study(store)
    store.record_environment(sid, cast(Environment, {  # keys no launcher reports today: kept, secrets dropped
        "host": "gpu-7", "sglang_version": "0.5.17", "HF_TOKEN": "hf_x", "api_key": "k", "db_password": "p",
        "kernel": "6.8", "env": {"AWS_SECRET_ACCESS_KEY": "s", "CUDA_VISIBLE_DEVICES": "0"}}))
    with store.engine.connect() as conn:
        row = conn.execute(text("SELECT host, sglang_version, simulated, extra_json FROM environments")).one()
    assert (row.host, row.sglang_version) == ("gpu-7", "0.5.17")
    assert json.loads(row.extra_json) == {"kernel": "6.8", "env": {"CUDA_VISIBLE_DEVICES": "0"}}


def test_opening_an_existing_database_again_changes_nothing(store: Store, db_path: Path) -> None:
    sid = _study(store, "kept")
    with sqlite3.connect(db_path) as raw:
        schema = raw.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
    with Store(f"sqlite:///{db_path}") as again:
        kept = again.get_study_by_name("kept")
        assert kept is not None and kept.id == sid
    with sqlite3.connect(db_path) as raw:
        assert raw.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall() == schema
        assert raw.execute("SELECT version_num FROM sweep_alembic_version").fetchall() == [(HEAD,)]


def test_database_failures_become_one_line_store_errors(tmp_path: Path, store: Store) -> None:
    _study(store, "twice")
    with pytest.raises(StoreError) as dup:
        _study(store, "twice")
    assert "\n" not in str(dup.value) and "twice" in str(dup.value)
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database file at all" * 100)
    with pytest.raises(StoreError, match="not a database"):
        Store(f"sqlite:///{garbage}")
    with pytest.raises(StoreError, match="no such run"):
        store.mark_run(424242, "failed", "x")


def _open_and_count(url: str) -> int:
    with Store(url) as s:
        return len(s.list_runs())


def test_workers_opening_a_fresh_database_at_once_all_succeed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'race.db'}"
    with ProcessPoolExecutor(4, mp_context=multiprocessing.get_context("spawn")) as pool:
        assert list(pool.map(_open_and_count, [url] * 4)) == [0, 0, 0, 0]
    with sqlite3.connect(tmp_path / "race.db") as raw:
        assert raw.execute("SELECT version_num FROM sweep_alembic_version").fetchall() == [(HEAD,)]


@pytest.mark.parametrize("optuna_first", [False, True])
def test_optuna_rdb_storage_shares_the_database(tmp_path: Path, optuna_first: bool) -> None:
    optuna = pytest.importorskip("optuna")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    if optuna_first:
        optuna.create_study(storage=url, study_name="warmup")
    store = Store(url)
    _round_trip(store)
    storage = optuna.storages.RDBStorage(url)
    study = optuna.create_study(storage=storage, study_name="knobs", direction="maximize")
    study.optimize(lambda trial: trial.suggest_float("x", 0.0, 1.0), n_trials=3)
    assert len(optuna.load_study(study_name="knobs", storage=url).trials) == 3
    _round_trip(store)
    store.close()
    with Store(url) as again:  # our migration still sees itself at head beside Optuna's tables
        assert len(again.list_runs()) == 2
        with again.engine.connect() as conn:
            assert _schema_diff(conn) == []
    command.check(alembic_config(url))  # autogenerate (no Store connection) ignores Optuna's tables
    tables = set(inspect(storage.engine).get_table_names())
    assert {"alembic_version", "sweep_alembic_version", "studies", "trials"} | TABLES <= tables
    storage.engine.dispose()


def test_finish_run_stores_100k_requests_in_one_fast_transaction(store: Store) -> None:
    sid = _study(store)
    rid = store.create_run(sid, store.create_server_config(sid, ServerConfig(), "sim", [], None), 128, "fp",
                           True, "virtual")
    records = [_record(i, t0=0.0) for i in range(100_000)]
    samples = [Sample(i * 0.1, "metrics", "num_running_reqs", float(i % 128)) for i in range(10_000)]
    started = time.perf_counter()
    store.finish_run(rid, _stats(), records, samples, 0.0)
    elapsed = time.perf_counter() - started
    run = store.get_run(rid)
    assert run is not None and (run.get("request_count"), run.get("sample_count")) == (100_000, 10_000)
    assert elapsed < 30, f"finish_run took {elapsed:.1f} s for 100k requests"


@pytest.mark.postgres
@pytest.mark.skipif(not PG_URL, reason="set SWEEP_TEST_PG_URL to a PostgreSQL SQLAlchemy URL")
def test_round_trip_on_postgresql() -> None:
    with fresh_database("sweep_store") as url:  # a database of its own: the test server is shared
        with Store(url) as first:
            _round_trip(first)
            insp = inspect(first.engine)
            assert TABLES | {"sweep_alembic_version"} <= set(insp.get_table_names())
            assert "run_summary" in insp.get_view_names()
            with first.engine.connect() as conn:
                assert _schema_diff(conn) == []
        with Store(url) as second:  # a second open is a no-op migration
            _round_trip(second)
            sid = _study(second)
            cid = second.create_server_config(sid, ServerConfig(8), "sim", ["--api-key", "pg-secret"], None)
            rid = second.create_run(sid, cid, 8, "fp", True, "virtual")
            assert second.abort_running(sid) == 1
            aborted = second.get_run(rid)
            assert aborted is not None and aborted.run.status == "aborted"
            assert "pg-secret" not in " ".join(second.server_configs(sid)[0].argv)


@pytest.mark.postgres
@pytest.mark.skipif(not PG_URL, reason="set SWEEP_TEST_PG_URL to a PostgreSQL SQLAlchemy URL")
def test_optuna_rdb_storage_shares_the_postgresql_database() -> None:
    optuna = pytest.importorskip("optuna")
    with fresh_database("sweep_store") as url, Store(url) as store:
        name = f"pg-{uuid.uuid4().hex[:8]}"
        study = optuna.create_study(storage=url, study_name=name, direction="maximize")
        study.optimize(lambda trial: trial.suggest_int("mrr", 8, 256), n_trials=2)
        _round_trip(store)
        assert len(optuna.load_study(study_name=name, storage=url).trials) == 2


def test_reading_commands_never_migrate_an_older_database(tmp_path: Path) -> None:
    """A results.db at the previous schema revision (0007, made by Alembic as an older sweep left it): `sweep runs`,
    `report`, `serve`... upgraded it in place, after which the older sweep refused it. Now they leave it at 0007 and
    say in one line to run `sweep db upgrade`, which upgrades it; then they read it."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    db = tmp_path / "old.db"
    command.upgrade(alembic_config(f"sqlite:///{db}"), "0007")

    def revision() -> str:
        with sqlite3.connect(db) as conn:
            return str(conn.execute("SELECT version_num FROM sweep_alembic_version").fetchone()[0])

    def sweep(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "sweep.cli", *args], capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(root), "COLUMNS": "300"}, timeout=120)

    assert revision() == "0007"
    for argv in (["runs", "--db", str(db)], ["report", "any", "--db", str(db), "--out", str(tmp_path / "rep")],
                 ["explain", "any", "--db", str(db)]):
        done = sweep(*argv)
        assert done.returncode == 5, (argv, done.stderr)
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and "older schema (revision 0007" in lines[0], lines
        assert f"run `sweep db upgrade --db {db}`" in lines[0]
        assert revision() == "0007", argv  # left as it was
    with pytest.raises(StoreError, match="older schema"):
        Store(f"sqlite:///{db}", readonly=True)
    up = sweep("db", "upgrade", "--db", str(db))
    assert up.returncode == 0 and f"upgraded from revision 0007 to {HEAD}" in up.stdout + up.stderr, up
    assert revision() == HEAD
    assert sweep("runs", "--db", str(db)).returncode == 0
    again = sweep("db", "upgrade", "--db", str(db))
    assert again.returncode == 0 and f"already at revision {HEAD}" in again.stdout + again.stderr


@pytest.mark.postgres
@pytest.mark.skipif(not PG_URL, reason="set SWEEP_TEST_PG_URL to a PostgreSQL SQLAlchemy URL")
def test_workers_writing_a_studys_winners_together_on_postgresql() -> None:
    """Found by CI: three workers that each found a shared study done wrote its winners at once; on PostgreSQL two
    delete-then-insert transactions raced, both deleted nothing, and one worker died on the unique key (exit 5).
    The study's row is now locked first."""
    import threading

    from sweep.store.records import WinnerRecord

    with fresh_database("sweep_store") as url, Store(url) as setup:
        sid = _study(setup)
        winners = [WinnerRecord(tier="default", is_primary=True, why="nothing passed")]
        errors: list[BaseException] = []
        start = threading.Barrier(4)

        def writer() -> None:
            with Store(url) as store:
                start.wait()
                for _ in range(25):
                    try:
                        store.write_winners(sid, winners)
                    except BaseException as exc:  # noqa: BLE001 - collected for the assertion
                        errors.append(exc)
                        return

        threads = [threading.Thread(target=writer) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors[0]
        assert [w.tier for w in setup.study_winners(sid)] == ["default"]


def test_environment_reads_back_as_a_typed_record(store: Store) -> None:
    """The environment travels typed: a launcher's facts go in, a frozen record with fields comes out (the column
    wins over an extra key of the same name; facts no field names stay in `extra`)."""
    sid = _study(store)
    assert store.environment(sid) is None
    store.record_environment(sid, {"host": "h1", "gpu_name": "NVIDIA H200", "gpu_count": 2, "gpu_memory_mib": 143771,
                                   "sglang_version": "0.5.17", "simulated": True, "parallel": "TP 2, DP 1",
                                   "sim_unmodelled_flags": ["--enable-dp-attention"], "kind": "sim",
                                   "versions": {"flashinfer-python": "0.4.1"},
                                   "dataset_fit": {"entries": 40, "clipped": 3, "dropped": 0},
                                   "trace": {"sends": 12, "gap_cv": 1.4}})
    env = store.environment(sid)
    assert env is not None
    assert (env.host, env.gpu_name, env.gpu_count, env.gpu_memory_mib) == ("h1", "NVIDIA H200", 2, 143771.0)
    assert (env.sglang_version, env.simulated, env.parallel) == ("0.5.17", True, "TP 2, DP 1")
    assert env.sim_unmodelled_flags == ("--enable-dp-attention",)
    assert env.dataset_fit == DatasetFit(entries=40, clipped=3, dropped=0)
    assert env.trace == TraceTiming(sends=12, gap_cv=1.4)
    assert env.extra == {"kind": "sim", "versions": {"flashinfer-python": "0.4.1"}}
    assert env.torch_version is None and env.model_path is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        env.host = "elsewhere"  # type: ignore[misc]  # the record is frozen: the assignment must fail


def test_the_stored_dataset_fit_and_trace_timing_read_back_into_the_report_section(store: Store) -> None:
    """Capture to store to report, typed: input_facts' JSON goes in the environment row, DatasetFit and TraceTiming
    come out, and the report's section says what it said when it read the dict by key."""
    from sweep.report.trace import trace_lines
    from sweep.views.study import StudyContext

    sid = _study(store)
    store.record_environment(sid, {"host": "h1", "dataset_fit": {"entries": 40, "clipped": 3, "dropped": 1,
                                                                 "context_len": 32768, "policy": "clip"},
                                   "trace": {"sends": 120, "span_s": 600.0, "gap_cv": 1.8, "peak_ratio": 2.5,
                                             "recorded_rps": 0.2, "start_s": 3600}})
    env = store.environment(sid)
    assert env is not None
    assert trace_lines(StudyContext(env=env)) == [
        "## Dataset and trace timing", "",
        "- Dataset fit: **3 clipped** and **1 dropped** of 40 entries to fit the server's context of 32,768 tokens "
        "(prompt + requested output; workload.dataset.overlong: clip).",
        "- The trace (from 3600 s in): 120 sends over 600 s, recorded rate 0.20 req/s; gap CV 1.80 (1 = Poisson), "
        "peak 10 s rate / mean 2.50.", ""]
    fits = dataclasses.replace(env, dataset_fit=DatasetFit(entries=40, context_len=4096, policy="drop"), trace=None)
    assert trace_lines(StudyContext(env=fits)) == [
        "## Dataset and trace timing", "",
        "- Dataset fit: all 40 entries fit the server's context of 4,096 tokens (prompt + requested output).", ""]
    assert trace_lines(StudyContext(env=dataclasses.replace(env, dataset_fit=None, trace=None))) == []
