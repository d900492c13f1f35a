"""The live page in a real headless Chromium: `sweep serve` over the database of a study that another process
runs on the simulator; the page's rows appear as windows finish, then the winner and the finished state.
A screenshot is kept in reports/live-page.png (a CI artifact)."""

from __future__ import annotations

import os
import re
import select
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sweep.store import Store

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
MISSING = ("chromium is not installed: `make test` runs scripts/browser.sh, which installs Debian's chromium "
           "and says above why it could not")
pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def chromium() -> None:
    """CI (.ci/run sets SWEEP_REQUIRE_CHROMIUM=1) fails without chromium: its screenshot is an artifact there."""
    if CHROMIUM is None:
        if os.environ.get("SWEEP_REQUIRE_CHROMIUM") == "1":
            pytest.fail(MISSING)
        pytest.skip(MISSING)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def browser(url: str, profile_dir: Path, *args: str) -> str:
    proc = subprocess.run([str(CHROMIUM), *FLAGS, f"--user-data-dir={profile_dir}", *args, url],
                          capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def sweep(*args: str, **kw: object) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-m", "sweep.cli", *args], text=True, env=env, **kw)  # type: ignore


def page_url(serve: subprocess.Popen[str], deadline_s: float = 60) -> str:
    """The URL `sweep serve --port 0` prints once it listens."""
    assert serve.stderr is not None
    end, seen = time.monotonic() + deadline_s, ""
    while time.monotonic() < end and serve.poll() is None:
        if select.select([serve.stderr], [], [], 0.5)[0]:
            seen += serve.stderr.readline()
            m = re.search(r"live page (http://127\.0\.0\.1:\d+/)", seen)
            if m:
                return m.group(1)
    raise AssertionError(f"sweep serve printed no URL: {seen!r}")


@pytest.mark.integration
def test_the_live_page_grows_as_windows_land_and_ends_with_the_winner(tmp_path: Path) -> None:
    db = tmp_path / "live.db"
    Store(f"sqlite:///{db}").close()  # the results database, empty: `sweep serve` never makes one itself
    serve = sweep("serve", "--db", str(db), "--study", "live", "--port", "0", cwd=tmp_path,
                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    study = sweep("knee", "--profile", str(ROOT / "profiles" / "smoke.yaml"), "--db", str(db), "--driver",
                  "virtual", "--study", "live", "--out", str(tmp_path / "rep"), "--set", "window.measure_seconds=20",
                  cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        url = page_url(serve)
        rows_seen: list[int] = []
        dom = ""
        end = time.monotonic() + 300
        while time.monotonic() < end:
            dom = browser(url, tmp_path / "chromium", "--dump-dom")
            rows = len(re.findall(r'<tr data-run-id="\d+"', dom))
            if rows:
                rows_seen.append(rows)
            if "(completed)" in dom and rows == 6:
                break
        assert study.wait(timeout=120) == 0, study.stderr.read() if study.stderr else ""
        assert rows_seen == sorted(rows_seen) and rows_seen[-1] == 6, rows_seen
        assert len(set(rows_seen)) >= 2, f"the rows never grew while the study ran: {rows_seen}"
        assert "(completed)" in dom
        winner = re.search(r'<div id="winner"[^>]*>([^<]*)</div>', dom)
        assert winner and "at concurrency" in winner.group(1) and "95% CI" in winner.group(1), winner
        assert dom.count("<canvas") >= 3  # uPlot's goodput, TTFT and TPOT charts
        # one legend serves the three charts (uPlot's own, one per chart, listed every configuration three
        # times): a line per ladder, and the SLA bounds the charts draw
        assert "u-legend" not in dom
        assert sorted(re.findall(r'<li data-config="([^"]+)">', dom)) == ["final mrr=4 mem=0.85", "final mrr=8 mem=0.85"]
        assert "SLA bound: TTFT p95 1000 ms, TPOT p95 100 ms" in dom
        assert 'id="n-failed">0<' in dom and 'id="n-queued">0<' in dom
        assert re.search(r'<p id="no-failures" class="muted">none', dom), "no failures: the page says none"
        # the workers table: the worker, the host it ran on, its status (sweep/views/workers.py)
        host = re.escape(socket.gethostname())
        assert re.search(rf'<tr data-worker="[^"]+"><td class="l">[^<]+</td><td class="l">{host}</td>', dom), dom
        shot = ROOT / "reports" / "live-page.png"
        shot.parent.mkdir(exist_ok=True)
        browser(url, tmp_path / "chromium", "--window-size=1400,1500", f"--screenshot={shot}")
        assert shot.stat().st_size > 10_000
    finally:
        for proc in (study, serve):
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=20)


def test_an_interrupted_study_has_no_eta_and_says_so(tmp_path: Path) -> None:
    """Its ETA said 'done' for any study not running, an interrupted one too."""
    from sweep.profile import load_profile
    from sweep.store import Store
    from sweep.ui.live import LiveServer

    url = f"sqlite:///{tmp_path / 'r.db'}"
    store = Store(url)
    prof = load_profile(ROOT / "profiles" / "smoke.yaml")
    sid = store.create_study("cut", "smoke", prof.model_dump_json(), prof.fingerprint(), "grid", True, "virtual",
                             "optuna-cut")
    store.finish_study(sid, "interrupted")
    live = LiveServer(url, "cut", port=0)
    try:
        dom = browser(live.start(), tmp_path / "chromium", "--dump-dom")
    finally:
        live.stop()
    assert '<span id="status" class="muted">(interrupted)</span>' in dom
    assert '<b id="eta">–</b>' in dom, re.search(r'<b id="eta">[^<]*</b>', dom)
