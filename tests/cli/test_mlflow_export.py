"""`sweep export STUDY --format mlflow` (issue 22 §5): a smoke study on the virtual driver written to a local `file:`
MLflow store and read back through MLflow's own client: a parent run per study with the winner and report.md, a
child run per configuration with its knobs, phase and a metric per ladder step at step = concurrency."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.smoke_study import smoke_knee

pytestmark = pytest.mark.integration  # every test here runs a whole study

ROOT = Path(__file__).resolve().parents[2]
FILE_STORE = {"MLFLOW_ALLOW_FILE_STORE": "true"}  # MLflow 3.x keeps `file:` stores behind this switch
mlflow = pytest.importorskip("mlflow", reason="MLflow is not installed: make install (or pip install -e '.[mlflow]')")


def sweep(*args: str, cwd: Path, pre: str = "") -> subprocess.CompletedProcess[str]:
    code = f"{pre}import sys\nfrom sweep.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd, timeout=120,
                          env={**os.environ, **FILE_STORE, "PYTHONPATH": str(ROOT), "COLUMNS": "200"})


@pytest.fixture(scope="module")
def smoke_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return smoke_knee(sweep, tmp_path_factory.mktemp("mlflow"), "ml-smoke")


def test_a_study_reads_back_as_a_parent_and_a_child_per_configuration(smoke_db: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow import MlflowClient

    for k, v in FILE_STORE.items():
        monkeypatch.setenv(k, v)

    from sweep.store import Store

    uri = (tmp_path / "mlruns").as_uri()
    done = sweep("export", "ml-smoke", "--db", str(smoke_db), "--format", "mlflow", "--tracking-uri", uri,
                 cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("sweep/smoke")
    assert exp is not None
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
    assert len(parents) == 1 and parents[0].info.run_name == "ml-smoke"
    with Store(f"sqlite:///{smoke_db}", readonly=True) as store:
        study = store.get_study_by_name("ml-smoke")
        assert study is not None
        stored = [w for w in store.study_winners(study.id) if w.is_primary][0]
        configs = [c for c in store.server_configs(study.id) if c.status != "aborted"]
        steps = {c.label(): sorted(r.concurrency for r in store.study_runs(study.id)
                                   if r.server_config_id == c.id and r.measured and r.phase == "final")
                 for c in configs}
    parent = parents[0].data
    assert parent.params["winner"] == stored.label
    assert parent.metrics["winner_goodput_tps"] == pytest.approx(stored.goodput_tps)
    assert "report.md" in [a.path for a in client.list_artifacts(parents[0].info.run_id)]
    assert sorted(c.info.run_name for c in children) == sorted(steps)
    for child in children:
        assert child.data.params["phase"] == "final"
        assert child.data.params["max_running_requests"] != "unset"
        history = client.get_metric_history(child.info.run_id, "goodput_tps")
        assert sorted(m.step for m in history) == steps[child.info.run_name]
        passes = client.get_metric_history(child.info.run_id, "passes_sla")
        assert {m.value for m in passes} <= {0.0, 1.0} and len(passes) == len(history)
        assert client.get_metric_history(child.info.run_id, "ttft_p99_ms")


def test_without_mlflow_one_line_and_exit_2(smoke_db: Path, tmp_path: Path) -> None:
    done = sweep("export", "ml-smoke", "--db", str(smoke_db), "--format", "mlflow", "--tracking-uri",
                 (tmp_path / "m").as_uri(), cwd=tmp_path, pre="import sys\nsys.modules['mlflow'] = None\n")
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert done.returncode == 2 and len(lines) == 1 and "pip install mlflow-skinny" in lines[0], done.stderr
    assert "sweep[" not in lines[0]  # "sweep" on PyPI is an unrelated project
    assert not (tmp_path / "m").exists()
    missing = sweep("export", "ml-smoke", "--db", str(smoke_db), "--format", "mlflow", cwd=tmp_path)
    assert missing.returncode == 2 and "--tracking-uri" in missing.stderr


def _one_error(done: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), done.stderr[-2000:]
    return lines[0]


def test_a_tracking_uri_in_a_folder_that_does_not_exist_creates_nothing(smoke_db: Path, tmp_path: Path) -> None:
    where = tmp_path / "any" / "dir"
    line = _one_error(sweep("export", "ml-smoke", "--db", str(smoke_db), "--format", "mlflow", "--tracking-uri",
                            f"sqlite:///{where}/m.db", cwd=tmp_path))
    assert f"the folder {where} does not exist" in line
    assert list(tmp_path.iterdir()) == []


def test_an_empty_tracking_uri_writes_no_mlflow_db(smoke_db: Path, tmp_path: Path) -> None:
    line = _one_error(sweep("export", "ml-smoke", "--db", str(smoke_db), "--format", "mlflow", "--tracking-uri", "",
                            cwd=tmp_path))
    assert "--tracking-uri is empty" in line and list(tmp_path.iterdir()) == []


def test_a_tracking_uri_at_the_results_database_adds_no_tables(smoke_db: Path, tmp_path: Path) -> None:
    import hashlib
    import sqlite3

    def tables() -> set[str]:
        con = sqlite3.connect(f"{smoke_db.as_uri()}?mode=ro", uri=True)
        try:
            return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            con.close()

    before, digest = tables(), hashlib.sha256(smoke_db.read_bytes()).hexdigest()
    line = _one_error(sweep("export", "ml-smoke", "--db", str(smoke_db), "--format", "mlflow", "--tracking-uri",
                            f"sqlite:///{smoke_db}", cwd=tmp_path))
    assert "is the results database" in line
    assert tables() == before and hashlib.sha256(smoke_db.read_bytes()).hexdigest() == digest


def test_a_refused_port_is_one_line_within_seconds_and_the_password_is_never_echoed(smoke_db: Path,
                                                                                    tmp_path: Path) -> None:
    import socket
    import time

    with socket.socket() as probe:  # a port nothing listens on: bound, closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    start = time.monotonic()
    done = sweep("export", "ml-smoke", "--db", str(smoke_db), "--format", "mlflow", "--tracking-uri",
                 f"http://alice:s3cret-pw@127.0.0.1:{port}", cwd=tmp_path)
    line = _one_error(done)
    assert time.monotonic() - start < 60
    assert "s3cret-pw" not in done.stderr + done.stdout and f"http://alice:***@127.0.0.1:{port}" in line
    assert "no MLflow server answers there" in line
