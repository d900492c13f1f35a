"""Predict before launching (issue 21 §3): the KV pool against the real H200 launches stored in the repo, the
start-or-not rule, and a study that skips a configuration predicted not to start (or launches it when told)."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sglang_sim.params import GPUS, plan_memory
from sglang_sim.shape import choose_model
from sweep.core.types import ServerConfig
from sweep.launchers.prediction import gpu_of, predict_launch

ROOT = Path(__file__).resolve().parents[2]
SHAPE = choose_model(ROOT / "models" / "llama3-8b-shape")
H200 = GPUS["H200"]


def logged_launches() -> list[tuple[str, float, bool, int]]:
    """(source, mem fraction, CUDA graphs on, the pool the server logged) of every stored real H200 launch."""
    out = []
    kv = json.loads((ROOT / "docs" / "calibration-data" / "kv-calib.json").read_text())
    pools = {(w["knobs"]["mem_fraction_static"], w["pool_tokens"]) for s in kv["studies"] for w in s["windows"]
             if w.get("pool_tokens")}
    out += [("kv-calib.json", frac, True, pool) for frac, pool in sorted(pools)]  # CUDA graphs on (docs/calibration.md)
    log = (ROOT / "tests" / "fixtures" / "sglang-0.5.17-server-log-excerpt.txt").read_text()
    frac = float(re.search(r"mem_fraction_static=([\d.]+)", log).group(1))  # type: ignore[union-attr]
    graphs_off = "disable_cuda_graph=True" in log
    pool = int(re.search(r"KV Cache is allocated\..*#tokens: (\d+)", log).group(1))  # type: ignore[union-attr]
    return [*out, ("sglang-0.5.17-server-log-excerpt.txt", frac, not graphs_off, pool)]


def test_the_pool_is_within_3_percent_of_every_logged_h200_launch() -> None:
    launches = logged_launches()
    assert len(launches) == 3  # mem 0.14 and 0.17 (kv-calib), mem 0.14 without CUDA graphs (the log excerpt)
    for source, frac, graphs, real in launches:
        plan = plan_memory(H200, SHAPE, frac, 4096, cuda_graph=graphs)
        assert plan.starts, source
        assert abs(plan.pool_tokens - real) / real < 0.03, (source, frac, plan.pool_tokens, real)
        assert abs(plan.pool_tokens - real) / real < 0.001  # as measured: 0.02% (docs/calibration.md)


def test_what_does_not_start() -> None:
    small = plan_memory(H200, SHAPE, 0.05, 8192)  # 6.96 GiB static share, 13.02 GiB of weights
    assert not small.starts and small.pool_tokens == 0 and "Not enough memory" in small.failure
    full = plan_memory(H200, SHAPE, 0.99, 8192)  # 1.39 GiB left for activations and CUDA graphs
    assert not full.starts and "CUDA out of memory" in full.failure and full.reserve_bytes > full.headroom_bytes
    assert plan_memory(H200, SHAPE, 0.99, 8192, cuda_graph=False).starts is False  # activations alone: 1.41 GiB
    assert plan_memory(H200, choose_model(ROOT / "models" / "tiny-llama"), 0.99, 8192).starts  # a tiny model fits
    assert plan_memory(H200, SHAPE, 0.85, 8192).startup_s == pytest.approx(75.0)  # warm, graphs on, dummy weights
    assert plan_memory(H200, SHAPE, 0.85, 8192, dummy_weights=False).startup_s > 80  # 13 GiB read from disk


def test_a_launch_is_predicted_from_its_knobs_and_flags() -> None:
    cfg = ServerConfig(mem_fraction_static=0.14, chunked_prefill_size=4096)
    plan = predict_launch(SHAPE, H200, cfg, ["--load-format", "dummy"])
    assert plan.pool_tokens == plan_memory(H200, SHAPE, 0.14, 4096).pool_tokens
    no_graphs = predict_launch(SHAPE, H200, cfg, ["--disable-cuda-graph"])
    assert no_graphs.startup_s < plan.startup_s and no_graphs.reserve_bytes < plan.reserve_bytes
    assert predict_launch(SHAPE, H200, ServerConfig(tp_size=2, mem_fraction_static=0.14)).pool_tokens > 2 * 52000
    real = gpu_of({"gpu_name": "NVIDIA H200", "gpu_memory_mib": 143771}, None)
    assert real is not None and real.mem_bytes == H200.mem_bytes and real.context_bytes == H200.context_bytes
    assert gpu_of({}, None) is None and gpu_of({}, "h200") == H200


def _ladder(tmp_path: Path, *flags: str) -> tuple[subprocess.CompletedProcess[str], list[tuple[Any, ...]]]:
    db = tmp_path / "r.db"
    run = subprocess.run([sys.executable, "-m", "sweep.cli", "ladder", "--profile", "smoke", "--db", str(db),
                          "--driver", "virtual", "--out", str(tmp_path), "--config",
                          "max_running_requests=8,mem_fraction_static=0.99", *flags],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT status, failure_reason, argv_json, predicted_starts, predicted_pool_tokens, "
                            "pool_tokens FROM server_configs").fetchall()
    return run, rows


def test_a_configuration_predicted_not_to_start_is_skipped_unless_asked(tmp_path: Path) -> None:
    run, rows = _ladder(tmp_path / "skip")
    out = run.stdout + run.stderr
    assert run.returncode == 3 and "predicted infeasible" in out, out  # every configuration failed: exit 3
    [(status, reason, argv, starts, predicted, pool)] = rows
    assert status == "infeasible" and reason.startswith("predicted infeasible: CUDA out of memory")
    assert "1.39 GiB" in reason and "KV pool" in reason  # the numbers
    assert json.loads(argv) == [] and starts == 0 and predicted > 0 and pool is None  # never launched
    run, rows = _ladder(tmp_path / "launch", "--no-skip-infeasible")
    out = run.stdout + run.stderr
    assert run.returncode == 3 and "predicted infeasible" not in out, out
    [(status, reason, argv, starts, predicted, pool)] = rows
    # launched: the simulated server itself refused to start, by the same accounting
    assert status == "infeasible" and reason.startswith("oom: CUDA out of memory") and starts == 0


@pytest.mark.integration
def test_a_launched_configuration_stores_its_prediction_beside_the_real_pool(tmp_path: Path) -> None:
    from sweep.profile import load_profile
    from sweep.study.orchestrator import Orchestrator

    prof = load_profile(ROOT / "profiles" / "smoke.yaml", {"search.space.max_running_requests": [8],
                                                            "search.space.mem_fraction_static": [0.3],
                                                            "ladder": [2], "window.measure_seconds": 2.0})
    db = tmp_path / "r.db"
    Orchestrator(prof, f"sqlite:///{db}", tmp_path, driver="virtual").knee("pred")
    with sqlite3.connect(db) as conn:
        [(starts, predicted, pool, startup)] = conn.execute(
            "SELECT predicted_starts, predicted_pool_tokens, pool_tokens, predicted_startup_s FROM server_configs"
        ).fetchall()
    assert starts == 1 and predicted == pool == plan_memory(H200, SHAPE, 0.3, 8192).pool_tokens
    assert startup == pytest.approx(75.0)
