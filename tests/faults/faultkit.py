"""The fault suite's tools: a real `sweep` subprocess on a tiny profile, the database read-only, the process table.

Every sweep started here runs with its working directory in the test's tmp_path, so each server it
launches (and anything that server spawns) has that cwd too: "no process of the launch left" is "no
live process whose cwd is tmp_path". Waits poll a condition until a deadline; no fixed sleeps.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psutil

from tests.waiting import wait_for  # tests is a package: pytest puts the checkout (its parent) on sys.path

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "profiles" / "smoke.yaml"
DEFAULT_EXTRA = ["--load-format", "dummy"]


def q(db: Path, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Rows of a read-only query; [] while the file or the table does not exist yet."""
    if not db.exists():
        return []
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error:
        return []
    try:
        return con.execute(sql, args).fetchall()
    except sqlite3.Error:
        return []
    finally:
        con.close()


def overrides(space: Sequence[int] = (4,), ladder: Sequence[int] = (2,), extra: Sequence[str] = (),
              measure_s: float = 1.5, **more: Any) -> list[str]:
    """--set flags for a quick study: the given grid of max_running_requests, ladder, sim flags in extra_args."""
    sets = {"search.space": {"max_running_requests": list(space)}, "ladder": list(ladder),
            "server.extra_args": [*DEFAULT_EXTRA, *extra], "window.measure_seconds": measure_s,
            "window.drain_seconds": 2, "window.warmup_requests": 2, "server.shutdown_grace_s": 5,
            "server.startup_timeout_s": 60,
            # 1.5 s windows at 2 users send a handful of requests: the faults, not the statistics, are under test
            "window.min_requests": 2, **more}
    out: list[str] = []
    for key, value in sets.items():
        out += ["--set", f"{key}={json.dumps(value)}"]
    return out


def sweep_argv(tmp: Path, study: str, sets: Sequence[str], driver: str = "http", resume: bool = True,
               extra: Sequence[str] = ()) -> list[str]:
    return [sys.executable, "-m", "sweep.cli", "sweep", "--profile", str(SMOKE), "--db", str(tmp / "results.db"),
            "--out", str(tmp / "reports"), "--driver", driver, "--study", study, "--no-progress", "--launcher",
            "sim", *(["--resume"] if resume else []), *sets, *extra]


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    return e


class Sweep:
    """One `sweep` subprocess in tmp (its own process group), stderr captured to a file."""

    def __init__(self, tmp: Path, argv: list[str], name: str = "sweep"):
        self.tmp = tmp
        self.err_path = tmp / f"{name}-{time.monotonic_ns()}.stderr"
        self._err = open(self.err_path, "wb")  # noqa: SIM115 - closed in wait()
        self.proc = subprocess.Popen(argv, cwd=tmp, env=env(), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=self._err, start_new_session=True)

    @property
    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def wait(self, timeout_s: float = 240) -> int:
        try:
            rc = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise AssertionError(f"sweep did not exit within {timeout_s:g} s; stderr:\n{self.stderr[-3000:]}") \
                from None
        finally:
            self._err.close()
        return rc

    def server_pids(self) -> list[int]:
        """Live descendants of this sweep that run the simulated server."""
        try:
            kids = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.Error:
            return []
        return [p.pid for p in kids if _is_server(p)]


def run_sweep(tmp: Path, argv: list[str], timeout_s: float = 240) -> tuple[int, str]:
    s = Sweep(tmp, argv)
    rc = s.wait(timeout_s)
    return rc, s.stderr


def _is_server(p: psutil.Process) -> bool:
    try:
        return "sglang_sim" in " ".join(p.cmdline()) and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def processes_in(tmp: Path) -> list[psutil.Process]:
    """Live processes (not zombies, not this test) whose working directory is tmp: what sweep left there."""
    found = []
    me = os.getpid()
    for p in psutil.process_iter():
        if p.pid == me:
            continue
        try:
            if p.status() != psutil.STATUS_ZOMBIE and Path(p.cwd()) == tmp:
                found.append(p)
        except (psutil.Error, OSError):
            continue
    return found


def assert_nothing_left(tmp: Path, timeout_s: float = 15) -> None:
    """No process of any launch (or its children) still runs: waits briefly for exits already under way."""
    def clean() -> bool:
        return not processes_in(tmp)

    try:
        wait_for(clean, timeout_s, "every process of the launches to be gone", every_s=0.2)
    except AssertionError:
        left = [(p.pid, " ".join(p.cmdline())[:120]) for p in processes_in(tmp)]
        for p in processes_in(tmp):
            p.kill()
        raise AssertionError(f"processes left behind: {left}") from None


def kill_everything_in(tmp: Path) -> None:
    """Teardown for a failed test: never leave a server of this test running."""
    for p in processes_in(tmp):
        try:
            p.kill()
        except psutil.Error:
            pass


def assert_measured_once(db: Path, n_configs: int, ladder_len: int) -> None:
    """Every configuration has exactly one finished attempt, each with one completed run per ladder step,
    aborted attempts excepted; nothing left running."""
    rows = q(db, "SELECT id, config_key, status FROM server_configs")
    finished = Counter(k for _, k, s in rows if s in ("completed", "infeasible", "failed"))
    assert len(finished) == n_configs and set(finished.values()) == {1}, rows
    assert {s for *_, s in rows} <= {"completed", "infeasible", "failed", "aborted"}, rows
    runs = q(db, "SELECT c.config_key, r.concurrency, r.phase FROM runs r JOIN server_configs c "
                 "ON c.id = r.server_config_id WHERE r.status = 'completed' AND c.status != 'aborted'")
    dup = [k for k, n in Counter(runs).items() if n > 1]
    assert not dup, f"runs measured twice: {dup}"
    assert not q(db, "SELECT id FROM runs WHERE status = 'running'")
    assert not q(db, "SELECT id FROM server_configs WHERE status IN ('running', 'pending')")
    per_cfg = Counter(k for k, _, _ in runs)
    ok = [k for _, k, s in rows if s == "completed"]
    assert all(per_cfg[k] == ladder_len for k in ok), (per_cfg, ladder_len)


def completed_runs(db: Path) -> list[tuple[Any, ...]]:
    """(run id, config id, concurrency) of every completed run, to compare before and after a resume."""
    return q(db, "SELECT id, server_config_id, concurrency FROM runs WHERE status = 'completed' ORDER BY id")


def study_status(db: Path, study: str) -> str | None:
    rows = q(db, "SELECT status FROM sweep_studies WHERE name = ?", (study,))
    return rows[0][0] if rows else None


def trial_states(db: Path) -> Counter[str]:
    return Counter(s for (s,) in q(db, "SELECT state FROM trials"))
