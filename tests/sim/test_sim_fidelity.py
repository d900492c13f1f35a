"""The simulator says what it does not model: flags it accepts but ignores are reported (terminal, DB, report),
--disable-cuda-graph is modelled, and the virtual driver refuses process faults it cannot apply."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import httpx
import numpy as np
import pytest

from sglang_sim.cost import CostModel
from sglang_sim.params import Efficiency, SimParams
from sweep.analysis.measure import compute_stats
from sweep.core.errors import ProfileError
from sweep.core.types import RequestSpec, ServerConfig
from sweep.drivers.virtual import VirtualDriver
from sweep.launchers.sglang import pick_server_info
from sweep.launchers.virtual import VirtualLauncher
from sweep.profile import SLA, Window, load_profile
from sweep.study.orchestrator import Orchestrator
from tests.simserver import sim_server

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "profiles" / "smoke.yaml"


def specs(n: int = 64) -> list[RequestSpec]:
    rng = np.random.default_rng(0)
    return [RequestSpec(index=i, input_ids=tuple(int(x) for x in rng.integers(3, 1000, 512)),
                        output_tokens=int(rng.integers(64, 256))) for i in range(n)]


def test_unmodelled_flags_are_listed_in_server_info() -> None:
    handle = VirtualLauncher(extra_args=["--attention-backend", "flashinfer", "--sampling-backend", "flashinfer"]
                             ).start(ServerConfig(schedule_policy="hrrn"))
    flags = handle.server_info["unmodelled_flags"]
    assert isinstance(flags, list)
    assert [str(f).split(":")[0] for f in flags] == ["--attention-backend flashinfer", "--sampling-backend flashinfer",
                                                "--schedule-policy hrrn"]
    plain = VirtualLauncher(extra_args=["--attention-backend", "triton", "--sampling-backend", "pytorch",
                                        "--disable-cuda-graph"]).start(ServerConfig())
    assert plain.server_info["unmodelled_flags"] == []  # the fitted backends, and a modelled flag


def test_the_http_simulator_reports_them_and_the_launcher_keeps_them() -> None:
    with sim_server("--attention-backend", "fa3") as url:
        info = httpx.get(url + "/server_info", timeout=5).json()
    assert any(f.startswith("--attention-backend fa3") for f in info["unmodelled_flags"])
    assert pick_server_info(info)["unmodelled_flags"] == info["unmodelled_flags"]
    assert info["tokenizer"].endswith("tokenizer.json")


def test_disable_cuda_graph_slows_decode_by_the_fitted_factor() -> None:
    on, off = CostModel(SimParams()), CostModel(SimParams(cuda_graph=False))
    factor = Efficiency().no_cuda_graph_decode
    assert off.decode(16, 16 * 1200) == pytest.approx(factor * on.decode(16, 16 * 1200))
    w = Window(warmup_requests=16, measure_seconds=20.0, drain_seconds=30.0)
    tpot: dict[bool, float] = {}
    for extra in ([], ["--disable-cuda-graph"]):
        h = VirtualLauncher(extra_args=extra).start(ServerConfig(max_running_requests=256))
        p50 = compute_stats(VirtualDriver().run_window(h, specs(), 16, w), SLA(ttft_ms=1e6, tpot_ms=1e6)).tpot_p50_ms
        assert p50 is not None
        tpot[bool(extra)] = p50
    # the real H200 point moved 2.54x; prefill steps are not slowed, so TPOT moves less than decode forwards do
    assert 2.0 < tpot[True] / tpot[False] < factor


def test_virtual_driver_groups_tokens_by_the_servers_stream_interval() -> None:
    h = VirtualLauncher(extra_args=["--stream-interval", "4"]).start(ServerConfig())
    res = VirtualDriver().run_window(h, specs(16), 4, Window(warmup_requests=0, measure_seconds=2.0))
    done = [r for r in res.records if r.finished_at is not None]
    assert done and all(r.chunk_tokens[0] == 1 and max(r.chunk_tokens) == 4 for r in done)


@pytest.mark.parametrize("flag", ["--sim-crash-after-s", "--sim-http500-rate", "--sim-hang-after-s=3"])
def test_virtual_driver_refuses_process_faults_before_touching_the_database(tmp_path: Path, flag: str) -> None:
    value = [] if "=" in flag else ["0.5"]
    prof = load_profile(SMOKE, {"server.extra_args": [flag, *value]})
    db = tmp_path / "r.db"
    with pytest.raises(ProfileError, match=r"server.extra_args: --sim-.* virtual driver"):
        Orchestrator(prof, f"sqlite:///{db}", tmp_path, driver="virtual")
    assert not db.exists()
    with pytest.raises(ProfileError):
        VirtualLauncher(extra_args=[flag, *value])


@pytest.mark.integration
def test_a_study_prints_stores_and_reports_the_unmodelled_flags(tmp_path: Path) -> None:
    class Console:
        def __init__(self) -> None:
            self.lines: list[str] = []

        def print(self, msg: str) -> None:
            self.lines.append(msg)

    prof = load_profile(SMOKE, {"server.extra_args": ["--attention-backend", "flashinfer"], "ladder": [2],
                                "search.space": {"max_running_requests": [4], "mem_fraction_static": [0.85]}})
    con = Console()
    run = Orchestrator(prof, f"sqlite:///{tmp_path / 'r.db'}", tmp_path, driver="virtual", console=con).knee("uf")
    assert sum("does not model" in line and "--attention-backend flashinfer" in line for line in con.lines) == 1
    with sqlite3.connect(tmp_path / "r.db") as db:
        (info,) = db.execute("SELECT server_info_json FROM server_configs").fetchone()
    assert any("flashinfer" in f for f in json.loads(info)["unmodelled_flags"])
    report = Path(run.report.markdown).read_text()
    assert "does not model these flags" in report and "--attention-backend flashinfer" in report
