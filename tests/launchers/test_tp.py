"""Tensor parallel as a searched knob (issue 24 item 2): the simulator's TP cost model, the GPU group a TP-2
configuration needs, the profile's rules, and a `sweep knee` over tp_size [1, 2] on the virtual driver."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import create_engine, inspect

from sglang_sim.cost import CostModel
from sglang_sim.engine import Engine
from sglang_sim.params import EngineKnobs, SimParams, resolve, with_tp
from sweep.core.errors import ProfileError
from sweep.core.types import ServerConfig
from sweep.engines import SGLANG
from sweep.fleet.gpus import plan
from sweep.launchers.placement import group_size, required_gpus
from sweep.profile import load_profile
from sweep.store import Store, alembic_config
from tests.pgdb import fresh_database, needs_pg

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "profiles" / "smoke.yaml"
TP_SPACE = {"tp_size": [1, 2], "mem_fraction_static": [0.85]}


def test_tp2_has_a_larger_kv_pool_and_faster_decode_but_not_twice_as_fast() -> None:
    one = SimParams.preset("H200", "llama3-8b-shape")
    two = with_tp(one, 2)
    knobs = EngineKnobs(mem_fraction_static=0.85)
    # each GPU holds half the weights and half the KV heads: more than twice the tokens fit
    assert resolve(two, knobs).max_total_num_tokens > 2 * resolve(one, knobs).max_total_num_tokens
    c1, c2 = CostModel(one), CostModel(two)
    for n in (8, 64, 256):
        t1, t2 = c1.decode(n, n * 1500.0), c2.decode(n, n * 1500.0)
        assert t1 / 2 < t2 < t1, (n, t1, t2)  # faster, but the all-reduces and the fixed step cost remain
    # the all-reduce term: two per layer, latency plus the hidden state of every token over the link
    assert c2.tp_fixed_s == pytest.approx(2 * 32 * two.eff.allreduce_latency_s) and c1.tp_fixed_s == 0.0
    assert c2.decode(64, 0.0) - c2.decode(0, 0.0) > (c1.decode(64, 0.0) - c1.decode(0, 0.0)) / 2


def test_the_tp_knob_reaches_the_engine_and_tp1_changes_nothing() -> None:
    base = SimParams.preset("H200", "llama3-8b-shape")
    assert Engine(base, EngineKnobs(tp_size=2)).params.model.tp == 2
    default, tp1 = Engine(base, EngineKnobs()), Engine(base, EngineKnobs(tp_size=1))
    assert default.params == tp1.params and default.cfg == tp1.cfg  # calibration (TP 1) untouched


def test_a_tp2_configuration_needs_two_gpus_and_the_fleet_gives_each_worker_both() -> None:
    assert required_gpus([], 2) == 2 and required_gpus(["--tp-size", "2"]) == 2 and required_gpus([]) == 1
    assert required_gpus(["--dp-size", "2"], 2) == 4
    prof = load_profile(SMOKE, {"search.space": TP_SPACE})
    assert group_size(prof) == 2
    seats, left = plan((0, 1), group_size(prof))
    assert [s.gpus for s in seats] == [(0, 1)] and left == []
    assert group_size(load_profile(SMOKE)) == 1  # no tp searched: one GPU per worker, as before


def test_the_launch_flag_and_label_of_tp() -> None:
    cfg = ServerConfig(max_running_requests=64, tp_size=2)
    assert SGLANG.knob_args(cfg) == ["--max-running-requests", "64", "--tp-size", "2"]
    assert cfg.label() == "mrr=64 tp=2"


def test_a_searched_tp_size_in_extra_args_too_is_refused() -> None:
    with pytest.raises(ProfileError, match="--tp-size, which search.space searches"):
        load_profile(SMOKE, {"search.space": TP_SPACE, "server.extra_args": ["--tp-size", "2"]})
    with pytest.raises(ProfileError, match="tp_size"):
        load_profile(SMOKE, {"search.space": {"tp_size": [0, 2]}})
    ranged = load_profile(SMOKE, {"search.space": {"tp_size": {"low": 1, "high": 8, "step": 2}}})
    assert ranged.search.space.largest_tp() == 7


@pytest.mark.integration
def test_knee_over_tp_1_and_2_on_the_virtual_driver(tmp_path: Path) -> None:
    db = tmp_path / "results.db"
    cmd = [sys.executable, "-m", "sweep.cli", "knee", "--profile", str(SMOKE), "--db", str(db), "--out",
           str(tmp_path / "reports"), "--driver", "virtual", "--study", "tp", "--no-progress",
           "--set", f"search.space={json.dumps(TP_SPACE)}", "--set", "ladder=[8, 32, 128]"]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    con = sqlite3.connect(db)
    stored = dict(con.execute("SELECT tp_size, status FROM server_configs").fetchall())
    assert stored == {1: "completed", 2: "completed"}
    best = dict(con.execute("SELECT tp_size, MAX(goodput_tps) FROM run_summary GROUP BY tp_size").fetchall())
    assert best[2] > best[1]  # TP 2: faster steps and a larger KV pool on the simulator
    report = (tmp_path / "reports" / "tp" / "report.md").read_text()
    assert "**Winner**: mem=0.85 tp=2" in report and "--tp-size 2" in report
    assert "| mem=0.85 tp=1 |" in report and "parallel: TP 1/2 (searched)" in report


def test_a_0007_database_gains_tp_size_keeping_its_configurations_and_goes_back(tmp_path: Path) -> None:
    _migrates_back_and_forth(f"sqlite:///{tmp_path / 'old.db'}")


@needs_pg
def test_a_0007_postgresql_database_gains_tp_size_and_goes_back() -> None:
    with fresh_database() as url:
        _migrates_back_and_forth(url)


def _migrates_back_and_forth(url: str) -> None:
    """A study at head taken back to 0007 (before tp_size), then opened again: its rows kept, the column back."""
    with Store(url) as store:  # a study stored at head, then taken back to 0007 (before this change)
        sid = store.create_study("s", "p", "{}", "fp", "grid", True, "virtual", None)
        store.create_server_config(sid, ServerConfig(max_running_requests=8), "virtual", [], trial_number=None)
    command.downgrade(alembic_config(url), "0007")
    engine = create_engine(url)
    assert "tp_size" not in {c["name"] for c in inspect(engine).get_columns("server_configs")}
    assert "tp_size" not in {c["name"] for c in inspect(engine).get_columns("run_summary")}
    engine.dispose()
    with Store(url) as store:  # opening it migrates to head again
        [row] = store.server_configs(sid)
        assert row.config == ServerConfig(max_running_requests=8)  # tp_size NULL: the server's default
        store.create_server_config(sid, ServerConfig(tp_size=2), "virtual", [], trial_number=None)
        assert {r.config.tp_size for r in store.server_configs(sid)} == {None, 2}
    engine = create_engine(url)
    assert "tp_size" in {c["name"] for c in inspect(engine).get_columns("run_summary")}
    engine.dispose()


@pytest.mark.integration
@pytest.mark.slow
def test_sweep_on_two_gpus_gives_one_worker_both_and_a_tp2_server_its_flag(tmp_path: Path) -> None:
    """`sweep sweep --gpus 0,1` over tp_size [1, 2] (simulated servers over HTTP): one worker holding GPUs 0,1,
    every server launched into that group, the TP-2 one with --tp-size 2 and its simulator modelling it."""
    db = tmp_path / "results.db"
    cmd = [sys.executable, "-m", "sweep.cli", "sweep", "--profile", str(SMOKE), "--db", str(db), "--out",
           str(tmp_path / "reports"), "--launcher", "sim", "--driver", "http", "--study", "tp-fleet", "--no-progress",
           "--gpus", "0,1", "--set", f"search.space={json.dumps(TP_SPACE)}", "--set", "ladder=[2]",
           "--set", "window.measure_seconds=1", "--set", "window.drain_seconds=2", "--set", "search.heartbeat_s=1",
           "--set", "window.min_requests=5"]  # a 1 s window at concurrency 2 sends ~11 requests
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=400,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr[-3000:]
    con = sqlite3.connect(db)
    assert [g for (g,) in con.execute("SELECT gpus FROM sweep_workers")] == ["0,1"]
    rows = con.execute("SELECT tp_size, status, argv_json, server_info_json FROM server_configs").fetchall()
    assert sorted((tp, status) for tp, status, _, _ in rows) == [(1, "completed"), (2, "completed")]
    for tp, _, argv, info in rows:
        assert json.loads(info)["sweep_launch"]["cuda_visible_devices"] == "0,1"
        assert json.loads(info)["tp_size"] == tp  # what the simulated server says it models
        args = json.loads(argv)
        assert args[args.index("--tp-size") + 1] == str(tp)
