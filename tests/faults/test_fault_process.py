"""Processes a launch leaves behind (an orphan in its own session) and a disk that fills up mid-study."""

from __future__ import annotations

import resource
import subprocess
from pathlib import Path

import pytest
from faultkit import (
    assert_measured_once,
    assert_nothing_left,
    env,
    overrides,
    q,
    run_sweep,
    sweep_argv,
)

pytestmark = pytest.mark.slow



def test_an_orphan_the_server_spawned_in_its_own_session_is_killed_at_stop(tmp_path: Path) -> None:
    """The emulable part of "orphan GPU process": a child that left the server's group and session (as a
    stray worker holding GPU memory would) is found through the recorded process tree and killed."""
    rc, err = run_sweep(tmp_path, sweep_argv(tmp_path, "orphan", overrides(extra=["--sim-spawn-orphan"]),
                                             resume=False))
    assert rc == 0, err[-3000:]
    (stop,), = q(tmp_path / "results.db", "SELECT stop_reason FROM server_configs")
    assert "killed leftover pids" in stop, stop
    assert_nothing_left(tmp_path)


def test_disk_full_mid_study_stops_cleanly_and_the_resume_finishes(tmp_path: Path) -> None:
    """Disk full, emulated with a real filesystem limit: RLIMIT_FSIZE caps every file sweep (and its server)
    writes, so the database's growth fails with EFBIG as it would with ENOSPC (Python ignores SIGXFSZ)."""
    sets = overrides(space=(4, 8), ladder=(2, 4))
    limit = 600 * 1024

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    argv = sweep_argv(tmp_path, "disk", sets)
    err_path = tmp_path / "disk.stderr"
    with open(err_path, "wb") as err_file:
        first = subprocess.run(argv, cwd=tmp_path, env=env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=err_file, preexec_fn=cap, timeout=300)
    err = err_path.read_text()
    if first.returncode == 0:
        pytest.skip(f"the study fit in {limit} bytes per file; nothing hit the limit")
    assert first.returncode in (1, 5), err[-3000:]
    assert err.strip().splitlines()[-1].startswith("error: ") and "Traceback" not in err, err[-3000:]
    assert "too large" in err.lower() or "full" in err.lower() or "disk" in err.lower(), err[-3000:]
    assert_nothing_left(tmp_path)
    rc, err = run_sweep(tmp_path, argv)
    assert rc == 0, err[-3000:]
    assert_measured_once(tmp_path / "results.db", n_configs=2, ladder_len=2)
    assert_nothing_left(tmp_path)
