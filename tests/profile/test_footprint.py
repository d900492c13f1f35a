"""Issue 23 §2: valid profiles that would exhaust the host. Open-loop rates and prompt lengths are bounded at load,
a study's client memory and database growth are estimated from its profile (sweep.views.footprint) with bytes per
record, chunk and row measured here again, and a study the machine cannot hold is refused in one line, exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import psutil
import pytest

from sweep.core.errors import ProfileError, UsageError
from sweep.core.types import RequestRecord, ServerConfig
from sweep.profile import MAX_TOKENS, RateArrival, load_profile
from sweep.profile.base import MAX_RATE
from sweep.store import Store
from sweep.study.resources import refuse_oversized, sqlite_folder
from sweep.views import footprint as fp
from sweep.workload.requests import make_block, workload_parts

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "profiles" / "smoke.yaml"
INTERACTIVE = ROOT / "profiles" / "interactive.yaml"


def _one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


@pytest.mark.parametrize("arrival", [
    {"kind": "poisson", "rate": 1e9},
    {"kind": "constant", "rate": MAX_RATE * 2},
    {"kind": "gamma", "rate": 1e9, "cv": 2.0},
    {"kind": "poisson", "rate": 1.0, "rates": [1.0, 2.0, 1e9]},
])
def test_open_loop_rate_has_an_upper_bound(arrival: dict[str, object]) -> None:
    with pytest.raises(ProfileError) as exc:
        load_profile(SMOKE, {"arrival": arrival})
    assert "arrival.rate" in _one_line(exc) and "10000" in str(exc.value)


def test_rate_at_the_bound_loads() -> None:
    arrival = load_profile(SMOKE, {"arrival": {"kind": "poisson", "rate": MAX_RATE}}).arrival
    assert isinstance(arrival, RateArrival) and arrival.rate == MAX_RATE


def test_prompt_beyond_the_models_context_length_is_refused() -> None:
    # models/tiny-llama: max_position_embeddings 4096
    with pytest.raises(ProfileError) as exc:
        load_profile(SMOKE, {"server.model_path": "models/tiny-llama",
                             "workload.prompt_len": {"kind": "fixed", "value": MAX_TOKENS, "max": MAX_TOKENS}})
    line = _one_line(exc)
    assert "workload.prompt_len" in line and "2,097,152" in line and "4,096" in line and "config.json" in line


def test_a_lognormal_tail_clamped_beyond_the_context_is_refused() -> None:
    with pytest.raises(ProfileError, match="prompt_len.*8,192.*4,096"):
        load_profile(INTERACTIVE, {"server.model_path": "models/tiny-llama"})  # its max: 8192


def test_the_servers_context_length_flag_wins_over_the_config() -> None:
    with pytest.raises(ProfileError) as exc:
        load_profile(SMOKE, {"server.extra_args": ["--load-format", "dummy", "--context-length", "256"]})
    assert "--context-length" in _one_line(exc) and "256" in str(exc.value)
    load_profile(SMOKE, {"server.extra_args": ["--load-format", "dummy", "--context-length=8192"]})


def test_a_shared_prefix_beyond_the_context_is_refused() -> None:
    with pytest.raises(ProfileError, match="workload.shared_prefix.length"):
        load_profile(SMOKE, {"server.model_path": "models/tiny-llama", "workload.shared_prefix.length": 5000})


def test_prompts_that_fit_and_models_not_here_load() -> None:
    load_profile(SMOKE, {"server.model_path": "models/tiny-llama"})  # uniform up to 512
    load_profile(SMOKE, {"server.model_path": "org/some-hub-model",
                         "workload.prompt_len": {"kind": "fixed", "value": MAX_TOKENS}})  # not known here


def _records(n: int, out: int) -> list[RequestRecord]:
    recs = []
    for i in range(n):
        t = 1000.0 + i
        times: list[float] = []
        tokens: list[int] = []
        for k in range(out):  # appended as the drivers do
            times.append(t + 0.1 + k * 0.01)
            tokens.append(1)
        recs.append(RequestRecord(index=i, concurrency=128, scheduled_at=t, sent_at=t, first_token_at=t + 0.1,
                                  finished_at=t + 3.0, chunk_times=times, chunk_tokens=tokens, prompt_tokens=900,
                                  output_tokens=out, sent_prompt_tokens=900, sent_output_tokens=out))
    return recs


@pytest.mark.parametrize("out", [1, 250])
def test_record_and_chunk_bytes_bound_what_records_take(out: int) -> None:
    from sweep.store import queries

    n = 2000
    queries.request_rows(1, _records(1, out), 1000.0)  # what it imports on first use is not the records' bytes
    tracemalloc.start()
    try:
        recs = _records(n, out)
        rows = queries.request_rows(1, recs, 1000.0)  # the rows finish_run builds from them
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(rows) == n
    assert held / n <= fp.RECORD_BYTES + out * fp.CHUNK_BYTES


def test_streamed_record_bytes_bound_what_a_streamed_windows_records_keep(tmp_path: Path) -> None:
    # a streamed window (sweep.ladder.recorder): each ended record is folded and stored in batches; what stays in
    # Python memory per request and token is bounded by RECORD_BYTES and STREAMED_CHUNK_BYTES (the ITL gaps are on
    # disk, mapped only at the window's end: docs/memory.md's RSS figures hold those)
    from sweep.ladder.recorder import Recorder

    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    try:
        sid = store.create_study("fp", "smoke", '{"sla": {}}', "fp1", "tpe", True, "virtual", "optuna-fp")
        cid = store.create_server_config(sid, ServerConfig(16), "sim", [], trial_number=0)
        store.update_attempt(cid, status="running")
        rid = store.create_run(sid, cid, 16, "fp1", True, "virtual", phase="final")
        n, out = 2000, 250
        rec = Recorder(store, rid, batch=200, every_s=3600)
        tracemalloc.start()
        try:
            before, _ = tracemalloc.get_traced_memory()
            recs = []
            for r in _records(n, out):
                rec(r, 1000.0, 1000.0 + n)
                recs.append(r)
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        rec.close_files()
    finally:
        store.close()
    assert rec.batches == n // 200 and all(len(r.chunk_times) <= 3 for r in recs)
    assert held / n <= fp.RECORD_BYTES + out * fp.STREAMED_CHUNK_BYTES
    assert held / n < out * fp.CHUNK_BYTES / 10  # an unstreamed window held ten times more and above


def test_cached_request_bytes_bound_what_made_requests_take() -> None:
    prof = load_profile(SMOKE, {"workload.prompt_len": {"kind": "fixed", "value": 1000}})
    parts = workload_parts(prof.workload)
    tracemalloc.start()
    try:
        specs = [s for b in range(4) for s in make_block(prof.workload, parts, b)]
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held / sum(len(s.input_ids) for s in specs) <= fp.SPEC_TOKEN_BYTES


def test_row_disk_bytes_bound_a_stored_window(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    store = Store(f"sqlite:///{db}")
    try:
        sid = store.create_study("fp", "smoke", '{"sla": {}}', "fp1", "tpe", True, "virtual", "optuna-fp")
        cid = store.create_server_config(sid, ServerConfig(16), "sim", [], trial_number=0)
        empty = db.stat().st_size
        rid = store.create_run(sid, cid, 16, "fp1", True, "virtual", phase="final")
        store.finish_run(rid, {"n_started": 20000}, _records(20000, 3), [], window_start=1000.0)
    finally:
        store.close()
    wal = Path(f"{db}-wal")
    grown = db.stat().st_size + (wal.stat().st_size if wal.exists() else 0) - empty
    assert grown / 20000 <= fp.ROW_DISK_BYTES


def test_footprint_grows_with_the_window_the_rate_and_the_soak() -> None:
    smoke = fp.study_footprint(load_profile(SMOKE))
    assert smoke.memory_bytes < 2**30 and smoke.windows == 6 and smoke.peak_window == "final c=8"
    week = fp.study_footprint(load_profile(INTERACTIVE, {"window.measure_seconds": 604800, "soak.enabled": False}))
    # a final that passes 128 climbs on to 256 (ladder_max): that window holds the most
    assert week.memory_bytes > 2**38 and week.peak_window == "final c=256"
    fast = fp.study_footprint(load_profile(SMOKE, {"arrival": {"kind": "poisson", "rate": MAX_RATE},
                                                  "window.measure_seconds": 3600}))
    assert fast.peak_requests >= MAX_RATE * 3600
    soaked = fp.study_footprint(load_profile(SMOKE, {"soak": {"enabled": True, "duration_s": 3600}}))
    assert soaked.peak_window == "soak" and soaked.windows == 7
    assert "client memory up to" in soaked.line() and "database up to" in soaked.line()


def test_refusal_names_the_figure_and_the_override(tmp_path: Path) -> None:
    big = fp.study_footprint(load_profile(INTERACTIVE, {"window.measure_seconds": 604800}))
    url = f"sqlite:///{tmp_path}/r.db"
    with pytest.raises(UsageError) as exc:
        refuse_oversized(big, url, available=8 * 2**30)
    line = _one_line(exc)
    assert "GiB of memory" in line and "8.0 GiB is available" in line and "--ignore-resources" in line
    with pytest.raises(UsageError, match=r"database may grow by .* free.*--ignore-resources"):
        refuse_oversized(big, url, available=2**50, free=2**20)
    refuse_oversized(big, "postgresql://h/db", available=2**50, free=0)  # disk of another host: not checked
    refuse_oversized(fp.study_footprint(load_profile(SMOKE)), url, available=2**31, free=2**31)
    assert sqlite_folder(url) == tmp_path and sqlite_folder("sqlite:///:memory:") is None


def _sweep(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "sweep.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=env)


def test_knee_refuses_a_study_the_machine_cannot_hold(tmp_path: Path) -> None:
    proc = _sweep("knee", "--profile", str(INTERACTIVE), "--db", "r.db", "--out", "out", "--no-progress",
                  "--set", "window.measure_seconds=604800", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr + proc.stdout
    lines = [x for x in (proc.stdout + proc.stderr).splitlines() if x.strip()]
    assert len(lines) == 1 and "GiB of memory" in lines[0] and "--ignore-resources" in lines[0]
    assert not (tmp_path / "r.db").exists()  # refused before the database is made


def test_plan_prints_the_estimate(tmp_path: Path) -> None:
    proc = _sweep("plan", "--profile", str(SMOKE), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "6 windows" in proc.stdout and "client memory up to" in proc.stdout and "database up to" in proc.stdout


def _cgroup(tmp_path: Path, v2: bool, limit: str, usage: int, inactive: int) -> tuple[Path, Path]:
    """A cgroup tree as a container sees it (its own cgroup at the mount's root) and its /proc/self/cgroup."""
    root = tmp_path / "cgroup"
    folder = root if v2 else root / "memory"
    folder.mkdir(parents=True)
    names = ("memory.max", "memory.current") if v2 else ("memory.limit_in_bytes", "memory.usage_in_bytes")
    (folder / names[0]).write_text(limit + "\n")
    (folder / names[1]).write_text(f"{usage}\n")
    (folder / "memory.stat").write_text(f"anon 1\n{'inactive_file' if v2 else 'total_inactive_file'} {inactive}\n")
    proc = tmp_path / "self-cgroup"
    proc.write_text("0::/box\n" if v2 else "4:memory:/process_api/box\n3:cpuset:/\n")
    return root, proc


@pytest.mark.parametrize("v2", [True, False], ids=["v2", "v1"])
def test_the_container_memory_limit_is_what_is_available(v2: bool, tmp_path: Path) -> None:
    from sweep.study.resources import cgroup_available

    root, proc = _cgroup(tmp_path, v2, str(2 * 2**30), usage=2**30 + 2**28, inactive=2**28)
    assert cgroup_available(root, proc) == 2**30  # 2 GiB limit, 1.25 GiB used of which 0.25 GiB reclaimable
    big = fp.study_footprint(load_profile(INTERACTIVE, {"window.measure_seconds": 3600}))
    assert 2**30 < big.memory_bytes < psutil.virtual_memory().available  # the host holds it, the container not
    with pytest.raises(UsageError) as exc:
        refuse_oversized(big, f"sqlite:///{tmp_path}/r.db", free=2**50, cgroup=root, self_cgroup=proc)
    assert "1.0 GiB is available (the container's memory limit less its usage)" in _one_line(exc)


def test_no_container_limit_leaves_the_hosts_figure(tmp_path: Path) -> None:
    from sweep.study.resources import cgroup_available, memory_available

    root, proc = _cgroup(tmp_path, True, "max", usage=2**30, inactive=0)
    assert cgroup_available(root, proc) is None
    assert memory_available(root, proc)[1] == ""
    assert cgroup_available(tmp_path / "none", tmp_path / "none") is None


@pytest.mark.parametrize("over", [{}, {"search.screening.probe": {"enabled": True, "fraction": 0.5}},
                                  {"search.prior": "none", "search.prior_margin": None},
                                  {"search.far_windows.near": "short", "search.screening.ties_max": 2},
                                  {"search.far_windows.near": "full", "search.screening.ties_max": None}])
def test_footprint_counts_the_windows_the_plan_counts(over: dict[str, object]) -> None:
    """Every window of the plan is in the footprint: the climb past the top, refinement, the screen (or the probes),
    the same-winner re-measures as if every one tied, the soak (it counted 31 of interactive's 39 before)."""
    from sweep.views.plan import study_plan

    prof = load_profile(INTERACTIVE, over)
    assert fp.study_footprint(prof).windows == study_plan(prof).steps
