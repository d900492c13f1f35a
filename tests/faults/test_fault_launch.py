"""Launch faults over real server processes: unknown flag, slow start past the timeout, OOM at start, a taken
port (item 4: when every launch fails, each configuration's class and reason is printed and sweep exits 3)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from faultkit import (
    ROOT,
    assert_nothing_left,
    overrides,
    q,
    run_sweep,
    study_status,
    sweep_argv,
)

from sweep.core.errors import LaunchError
from sweep.core.types import ServerConfig
from sweep.launchers import procs
from sweep.launchers.sglang import SGLangLauncher
from sweep.profile import load_profile

pytestmark = pytest.mark.slow



def _every_launch_fails(tmp: Path, sets: list[str], cls: str) -> str:
    rc, err = run_sweep(tmp, sweep_argv(tmp, "f", sets, resume=False))
    assert rc == 3, f"exit {rc}; stderr:\n{err[-3000:]}"
    assert "every configuration failed (2)" in err and "Traceback" not in err, err[-3000:]
    rows = q(tmp / "results.db", "SELECT status, failure_reason FROM server_configs")
    assert len(rows) == 2 and all(r[1].startswith(f"{cls}: ") for r in rows), rows
    for label in ("mrr=4", "mrr=8"):
        assert any(line.startswith(cls) and label in line for line in err.splitlines()), err[-3000:]
    assert study_status(tmp / "results.db", "f") == "completed"
    assert not q(tmp / "results.db", "SELECT id FROM runs")
    assert_nothing_left(tmp)
    return err


def test_unknown_server_flag_fails_every_launch_and_exits_3(tmp_path: Path) -> None:
    _every_launch_fails(tmp_path, overrides(space=(4, 8), extra=["--no-such-flag"]), "bad_flag")


def test_slow_start_past_the_timeout_fails_every_launch_and_leaves_nothing(tmp_path: Path) -> None:
    sets = overrides(space=(4, 8), extra=["--sim-slow-start-s", "60"]) + ["--set", "server.startup_timeout_s=3"]
    _every_launch_fails(tmp_path, sets, "timeout")


def test_oom_at_start_is_infeasible_with_its_reason(tmp_path: Path) -> None:
    # launched although predicted not to start (server.skip_infeasible false): the server's own OOM is the fault
    sets = overrides(space=(4,)) + ["--set", 'search.space={"max_running_requests": [4, 8], '
                                             '"mem_fraction_static": [0.05]}', "--set", "server.skip_infeasible=false"]
    rc, err = run_sweep(tmp_path, sweep_argv(tmp_path, "oom", sets, resume=False))
    assert rc == 3, err[-3000:]
    rows = q(tmp_path / "results.db", "SELECT status, failure_reason FROM server_configs")
    assert [r[0] for r in rows] == ["infeasible", "infeasible"] and all(r[1].startswith("oom: ") for r in rows)
    assert err.count("oom ") >= 2, err[-3000:]
    assert_nothing_left(tmp_path)


def test_a_taken_port_is_retried_then_reported_port_in_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Someone else holds the port the launcher picked (twice): a clean port_in_use failure, no server left."""
    monkeypatch.chdir(tmp_path)  # the server inherits this cwd: that is how assert_nothing_left finds it
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    monkeypatch.setattr(procs, "free_port", lambda host="127.0.0.1", within=None: port)
    prof = load_profile(ROOT / "profiles" / "smoke.yaml", {"server.startup_timeout_s": 30})
    spec = prof.server.model_copy(update={"extra_args": ["--load-format", "dummy"]})
    launcher = SGLangLauncher(spec, tmp_path / "logs", module="sglang_sim", simulated=True, validate=False)
    try:
        with pytest.raises(LaunchError) as err:
            launcher.start(ServerConfig(max_running_requests=4))
    finally:
        holder.close()
    assert err.value.reason == "port_in_use", str(err.value)
    assert len(list((tmp_path / "logs").glob("*.log"))) == 2  # the one retry
    assert_nothing_left(tmp_path)
