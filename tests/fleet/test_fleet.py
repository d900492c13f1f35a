"""`sweep sweep --gpus`: one worker per GPU group on one host, sharing a SQLite study; never a shared port or GPU."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import psutil
import pytest

from sweep.core.errors import LaunchError, UsageError
from sweep.core.types import ServerConfig
from sweep.fleet.gpus import plan, refuse_twins
from sweep.launchers.sglang import SGLangLauncher
from sweep.profile import load_profile
from sweep.store import Store

ROOT = Path(__file__).resolve().parents[2]
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


@pytest.mark.integration
@pytest.mark.slow
def test_two_workers_on_one_host_never_share_a_port_or_a_gpu(tmp_path: Path) -> None:
    db = tmp_path / "results.db"
    space = {"max_running_requests": [4, 8], "mem_fraction_static": [0.8, 0.85]}
    cmd = [sys.executable, "-m", "sweep.cli", "sweep", "--profile", str(SMOKE), "--db", str(db), "--out",
           str(tmp_path / "reports"), "--launcher", "sim", "--driver", "http", "--study", "fleet", "--no-progress",
           "--gpus", "0,1,2,3", "--gpus-per-server", "2", "--set", f"search.space={json.dumps(space)}",
           "--set", "ladder=[2]", "--set", "window.measure_seconds=1", "--set", "window.drain_seconds=2",
           "--set", "search.heartbeat_s=1", "--set", "window.min_requests=5"]  # ~11 requests a 1 s window
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


def test_a_fleet_refuses_to_start_twins_of_live_workers_of_its_study(tmp_path: Path) -> None:
    """A worker of the study still running on this host (here: this test's own process, alive by pid and start
    time) stops a fleet before it opens the study; a dead worker's row (pid gone) does not."""
    me = psutil.Process()
    with Store(f"sqlite:///{tmp_path / 'results.db'}") as store:
        sid = store.create_study("twins", "smoke", "{}", "fp", "grid", True, "http", None)
        refuse_twins(store, "twins")  # no worker yet
        refuse_twins(store, None)  # a new study (no name given) has none
        dead = store.register_worker(sid, "gpu1", socket.gethostname(), me.pid, me.create_time() - 100.0, "1", "v", "fp")
        refuse_twins(store, "twins")  # a reused pid is another process: that worker is dead
        store.register_worker(sid, "gpu0", socket.gethostname(), me.pid, me.create_time(), "0", "v", "fp")
        with pytest.raises(UsageError) as err:
            refuse_twins(store, "twins")
        store.set_worker_status(dead, "lost")
    assert "\n" not in str(err.value)
    assert f"study twins already has 1 live worker(s) on this host: gpu0 (pid {me.pid})" in str(err.value)


@pytest.mark.integration
@pytest.mark.slow
def test_workers_die_with_their_fleet_after_kill_9(tmp_path: Path) -> None:
    """kill -9 of `sweep sweep --gpus 0,1`: its workers (and their servers) stop, they do not run on orphaned."""
    db = tmp_path / "results.db"
    space = {"max_running_requests": [4, 8], "mem_fraction_static": [0.8, 0.85]}
    cmd = [sys.executable, "-m", "sweep.cli", "sweep", "--profile", str(SMOKE), "--db", str(db), "--out",
           str(tmp_path / "reports"), "--launcher", "sim", "--driver", "http", "--study", "orphans", "--no-progress",
           "--gpus", "0,1", "--set", f"search.space={json.dumps(space)}", "--set", "ladder=[2,4]",
           "--set", "window.measure_seconds=60", "--set", "search.heartbeat_s=1"]
    fleet = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env=dict(os.environ, PYTHONPATH=str(ROOT)))
    family: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:  # both workers registered and each serving (a server under it)
            assert fleet.poll() is None, "the fleet ended before its workers ran"
            workers = psutil.Process(fleet.pid).children()
            if len(workers) == 2 and all(w.children() for w in workers) and db.exists():
                with contextlib.closing(sqlite3.connect(db)) as con:
                    with contextlib.suppress(sqlite3.OperationalError):
                        if con.execute("SELECT count(*) FROM sweep_workers WHERE status='running'").fetchone()[0] == 2:
                            break
            time.sleep(0.2)  # polling interval of a condition with a deadline
        else:
            raise AssertionError("the fleet's two workers never ran")
        family = psutil.Process(fleet.pid).children(recursive=True)
        fleet.kill()
        fleet.wait(10)
        gone, alive = psutil.wait_procs(family, timeout=90)
        assert not alive, [p.info if hasattr(p, "info") else p.pid for p in alive]
        assert {p.pid for p in gone} == {p.pid for p in family}
    finally:  # only what this test started: the fleet's family and whatever it started since (servers)
        for p in list(family):
            with contextlib.suppress(psutil.Error):
                family += p.children(recursive=True)
        for p in family:
            with contextlib.suppress(psutil.Error):
                p.kill()
        if fleet.poll() is None:
            fleet.kill()
            fleet.wait()
