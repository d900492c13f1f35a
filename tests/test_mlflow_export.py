"""`sweep export STUDY --format mlflow` (issue 22 §5): a smoke study on the virtual driver written to a local `file:`
MLflow store and read back through MLflow's own client: a parent run per study with the winner and report.md, a
child run per configuration with its knobs, phase and a metric per ladder step at step = concurrency."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from smoke_study import smoke_knee

ROOT = Path(__file__).resolve().parent.parent
FILE_STORE = {"MLFLOW_ALLOW_FILE_STORE": "true"}  # MLflow 3.x keeps `file:` stores behind this switch
mlflow = pytest.importorskip("mlflow", reason="MLflow is not installed: make install (or pip install -e '.[mlflow]')")


def sweep(*args: str, cwd: Path, pre: str = "") -> subprocess.CompletedProcess[str]:
    code = f"{pre}import sys\nfrom sweep.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd, timeout=300,
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
