"""Numbers that read as numbers (issue 33): thousands separators and never scientific notation in every table;
`sweep history` at 80 columns keeps what answers the question and drops what is empty."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweep.cli import main
from sweep.cli.app import emit_rows
from sweep.profile import load_profile
from sweep.store import Store
from tests.cli.test_history import _study

ROOT = Path(__file__).resolve().parents[2]


def test_a_table_prints_ten_thousand_with_separators_never_an_exponent(monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    emit_rows([{"run_id": 1, "goodput_tps": 10300.7, "ttft_p99_ms": 19.794, "output_tps": 123456.0}],
              ["run_id", "goodput_tps", "ttft_p99_ms", "output_tps"], "table")
    out = capsys.readouterr().out
    assert "10,301" in out and "123,456" in out and "19.79" in out
    assert "e+" not in out


def test_history_at_80_columns_keeps_winner_knee_goodput_interval_and_drops_an_empty_host(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "r.db"
    store = Store(f"sqlite:///{db}")
    _study(store, "before-upgrade", "0.5.17", "", 15400.0, (15300.0, 15500.0))
    _study(store, "after-upgrade", "0.5.23", "", 14100.0, (14000.0, 14200.0))
    store.close()
    fp = load_profile(ROOT / "profiles" / "smoke.yaml").fingerprint()
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["history", "--db", str(db), "--fingerprint", fp]) == 0
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert all(len(ln) <= 80 for ln in lines), out.out
    head = lines[0].split()
    assert "host" not in head  # nothing recorded: not a column
    for word in ("goodput", "c=8", "mrr=8", "15,400", "15,300–15,500", "-8.4%"):
        assert word in out.out, (word, out.out)
    assert "left out to fit 80 columns: sglang_version, gpu_name (" in out.err  # where it ran, not the answer


def test_history_json_keeps_every_field_even_the_empty_host(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "r.db"
    store = Store(f"sqlite:///{db}")
    _study(store, "only", "0.5.17", "", 15400.0, (15300.0, 15500.0))
    store.close()
    fp = load_profile(ROOT / "profiles" / "smoke.yaml").fingerprint()
    assert main(["history", "--db", str(db), "--fingerprint", fp, "--format", "json"]) == 0
    assert "host" in json.loads(capsys.readouterr().out)["studies"][0]


def test_a_windows_goodput_interval_is_named_in_its_unit_and_the_migration_keeps_its_values(tmp_path: Path) -> None:
    """runs.goodput_ci_low/high were requests/s while study_winners' columns of the same names are output tok/s;
    migration 0022 renames the runs columns goodput_rps_ci_low/high (values kept) and back."""
    import sqlite3

    from alembic import command

    from sweep.core.types import ServerConfig
    from sweep.store import alembic_config
    from tests.store.test_store import _stats
    from tests.store.test_store import _study as store_study

    url = f"sqlite:///{tmp_path / 'r.db'}"
    store = Store(url)
    sid = store_study(store)
    rid = store.create_run(sid, store.create_server_config(sid, ServerConfig(), "sim", [], None), 16, "fp",
                           True, "virtual")
    store.finish_run(rid, _stats(goodput_rps=19.0, goodput_tps=4986.0, goodput_rps_ci_low=18.5,
                                 goodput_rps_ci_high=19.79), [], [], 0.0)
    run = store.get_run(rid)
    assert run is not None and (run.get("goodput_rps_ci_low"), run.get("goodput_rps_ci_high")) == (18.5, 19.79)
    store.close()

    def cols(table: str) -> set[str]:
        with sqlite3.connect(tmp_path / "r.db") as conn:
            return {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}

    assert {"goodput_rps_ci_low", "goodput_rps_ci_high"} <= cols("runs") and "goodput_ci_low" not in cols("runs")
    assert "goodput_rps_ci_low" in cols("run_summary") and "goodput_ci_low" in cols("study_winners")
    command.downgrade(alembic_config(url), "0016")
    with sqlite3.connect(tmp_path / "r.db") as conn:
        assert conn.execute("SELECT goodput_ci_high FROM run_summary").fetchone() == (19.79,)
    command.upgrade(alembic_config(url), "head")
    with sqlite3.connect(tmp_path / "r.db") as conn:
        assert conn.execute("SELECT goodput_rps_ci_low, goodput_rps_ci_high FROM runs").fetchone() == (18.5, 19.79)


def test_a_soak_reads_as_its_offered_rate_with_its_cap_marked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """The soak is stored with its offered rate (runs.offered_rps) and its in-flight cap as concurrency; `sweep runs`
    and `sweep show` read run_summary, which had no offered_rps: they showed concurrency 1024 and no rate."""
    from sweep.core.types import ServerConfig
    from tests.store.test_store import _stats
    from tests.store.test_store import _study as store_study

    db = tmp_path / "r.db"
    store = Store(f"sqlite:///{db}")
    sid = store_study(store, "soaked")
    cid = store.create_server_config(sid, ServerConfig(), "sim", [], None)
    final = store.create_run(sid, cid, 16, "fp", True, "virtual")
    store.finish_run(final, _stats(goodput_tps=4986.0), [], [], 0.0)
    soak = store.create_run(sid, cid, 1024, "fp", True, "virtual", phase="soak", offered_rps=20.03)
    store.finish_run(soak, _stats(goodput_tps=4990.0), [], [], 0.0)
    store.close()
    assert main(["runs", "--db", str(db), "--format", "json"]) == 0
    rows = {r["run_id"]: r for r in json.loads(capsys.readouterr().out)["runs"]}
    assert rows[soak]["offered_rps"] == 20.03 and rows[final]["offered_rps"] is None
    monkeypatch.setenv("COLUMNS", "120")
    assert main(["runs", "--db", str(db)]) == 0
    table = capsys.readouterr().out
    assert "req/s" in table.splitlines()[0]
    soak_line = next(ln for ln in table.splitlines() if ln.split() and ln.split()[0] == str(soak))
    assert "≤1024" in soak_line and "20.03" in soak_line
    assert main(["show", str(soak), "--db", str(db), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["run"]["offered_rps"] == 20.03
