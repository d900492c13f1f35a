"""`sweep sweep --gpus`: one worker per GPU group on one host, sharing a SQLite study; never a shared port or GPU."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from sweep.core.errors import LaunchError
from sweep.core.types import ServerConfig
from sweep.fleet.gpus import plan
from sweep.launchers.sglang import SGLangLauncher
from sweep.profile import load_profile

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ROOT / "profiles" / "smoke.yaml"


def test_plan_groups_gpus_with_their_own_port_ranges_and_reports_leftovers() -> None:
    seats, left = plan((0, 1, 2, 3, 4), 2)
    assert [s.gpus for s in seats] == [(0, 1), (2, 3)] and left == [4]
    assert seats[0].ports[1] <= seats[1].ports[0]  # disjoint port ranges
    assert [s.label for s in seats] == ["gpu0-1", "gpu2-3"]


def test_a_configuration_needing_more_gpus_than_the_group_has_is_skipped_with_the_reason(tmp_path: Path) -> None:
    spec = load_profile(SMOKE).server.model_copy(update={"extra_args": ["--tp-size", "2"]})
    launcher = SGLangLauncher(spec, tmp_path, module="sglang_sim", simulated=True, gpu_ids=[3], validate=False)
    with pytest.raises(LaunchError, match=r"needs 2 GPUs .* has 1 \(CUDA_VISIBLE_DEVICES=3\)") as err:
        launcher.start(ServerConfig(8))
    assert err.value.reason == "too_few_gpus"


@pytest.mark.slow
def test_two_workers_on_one_host_never_share_a_port_or_a_gpu(tmp_path: Path) -> None:
    db = tmp_path / "results.db"
    space = {"max_running_requests": [4, 8], "mem_fraction_static": [0.8, 0.85]}
    cmd = [sys.executable, "-m", "sweep.cli", "sweep", "--profile", str(SMOKE), "--db", str(db), "--out",
           str(tmp_path / "reports"), "--launcher", "sim", "--driver", "http", "--study", "fleet", "--no-progress",
           "--gpus", "0,1,2,3", "--gpus-per-server", "2", "--set", f"search.space={json.dumps(space)}",
           "--set", "ladder=[2]", "--set", "window.measure_seconds=1", "--set", "window.drain_seconds=2",
           "--set", "search.heartbeat_s=1"]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=400,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "[gpu0-1]" in done.stderr and "[gpu2-3]" in done.stderr  # a progress line per worker
    con = sqlite3.connect(db)
    seats = dict(con.execute("SELECT id, gpus FROM sweep_workers").fetchall())
    assert sorted(seats.values()) == ["0,1", "2,3"]
    rows = con.execute("SELECT config_key, status, worker_id, server_info_json FROM server_configs").fetchall()
    assert Counter(k for k, s, _, _ in rows if s == "completed") == Counter({k: 1 for k, *_ in rows})
    launches = [(w, json.loads(info)["sweep_launch"]) for _, _, w, info in rows]
    for worker, rec in launches:  # the server got its worker's GPU group, and a port from its worker's range
        assert rec["cuda_visible_devices"] == seats[worker]
        assert rec["host"] and rec["port"]
    ports_by_worker = {w: {rec["port"] for v, rec in launches if v == w} for w in seats}
    a, b = ports_by_worker.values()
    assert not a & b, ports_by_worker
    assert len({w for w, _ in launches}) == 2, "both workers measured"
    placed = con.execute("SELECT DISTINCT worker_id, gpu_index FROM runs").fetchall()
    assert {(w, seats[w]) for w, _ in placed} == set(placed)
