"""`sweep crosscheck` end to end on the simulated server over HTTP: both rows stored, compared in the report,
agreeing within tolerance; and a reference that sees every reply 300 ms late (a real delay proxy) is flagged."""

from __future__ import annotations

import importlib.util
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.delayproxy import delay_proxy
from tests.simserver import sim_server

ROOT = Path(__file__).resolve().parents[2]

# No shared prefixes and a pool larger than both windows together: no request repeats, so the figures may differ only
# by what the clients do (varied lengths keep closed-loop users from moving in lock-step batches).
PROFILE = """
name: crosscheck-ci
sla: {ttft_ms: 2000, tpot_ms: 200, max_error_rate: 0.05}
workload:
  seed: 3
  num_requests: 3000
  prompt_len: {kind: uniform, low: 128, high: 512}
  output_len: {kind: uniform, low: 16, high: 64}
arrival: {kind: closed}
ladder: LADDER
ladder_max: 0  # the steps the test names, no climbing on past them
window: {warmup_requests: 8, warmup_seconds: 1, measure_seconds: 5, drain_seconds: 10, request_timeout_s: 30}
server: {launcher: sim, model_path: models/llama3-8b-shape, startup_timeout_s: 60}
search: {sampler: grid, space: {max_running_requests: [16]}}
"""


def _crosscheck(tmp_path: Path, ladder: str, *extra: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    prof = tmp_path / "crosscheck-ci.yaml"
    prof.write_text(PROFILE.replace("LADDER", ladder))
    db = tmp_path / "results.db"
    proc = subprocess.run([sys.executable, "-m", "sweep.cli", "crosscheck", "--profile", str(prof), "--db", str(db),
                           "--out", str(tmp_path / "reports"), "--study", "cc", "--config", "max_running_requests=16",
                           *extra],
                          capture_output=True, text=True, timeout=400, cwd=ROOT)
    return proc, db


def _reference_table(report: str) -> list[list[str]]:
    section = report.split("## Cross-check: an independent client on the same server", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| ") and not ln.startswith("| config")]
    return [[c.strip() for c in r.strip("|").split("|")] for r in rows]


@pytest.mark.slow
def test_crosscheck_stores_both_rows_and_the_report_shows_agreement(tmp_path: Path) -> None:
    proc, db = _crosscheck(tmp_path, "[4, 8]", "--reference", "h11")
    assert proc.returncode == 0, proc.stderr[-3000:]
    con = sqlite3.connect(db)
    ours = con.execute("SELECT id, concurrency, driver, status, n_completed FROM runs "
                       "WHERE reference_for_run_id IS NULL ORDER BY id").fetchall()
    refs = con.execute("SELECT reference_for_run_id, concurrency, driver, status, n_completed FROM runs "
                       "WHERE reference_for_run_id IS NOT NULL ORDER BY id").fetchall()
    assert [(c, d, s) for _, c, d, s, _ in ours] == [(4, "http", "completed"), (8, "http", "completed")]
    assert [(c, d, s) for _, c, d, s, _ in refs] == [(4, "reference-h11", "completed"),
                                                     (8, "reference-h11", "completed")]
    assert [r[0] for r in refs] == [o[0] for o in ours]  # each reference row names sweep's row of its step
    assert all(r[4] > 20 for r in ours + refs)
    # the reference's requests are stored like sweep's own
    assert con.execute("SELECT count(*) FROM requests WHERE run_id IN "
                       "(SELECT id FROM runs WHERE reference_for_run_id IS NOT NULL)").fetchone()[0] > 40
    # the ladder and the knee see only sweep's rows
    report = (tmp_path / "reports" / "cc" / "report.md").read_text()
    steps = report.split("## Every configuration and step", 1)[1].split("\n## ", 1)[0]
    assert len([ln for ln in steps.splitlines() if ln.startswith("| mrr=16")]) == 2
    table = _reference_table(report)
    assert len(table) == 2 * 5  # five figures per step
    assert {row[3] for row in table} == {"TTFT P50 (ms)", "TTFT P99 (ms)", "TPOT P50 (ms)", "TPOT P99 (ms)",
                                         "output tok/s"}
    verdicts = [row[8] for row in table]
    assert "**DIFFERS**" not in verdicts, table
    judged = {(row[1], row[3]) for row in table if row[8] == "agrees"}
    for c in ("4", "8"):  # P50s and throughput are judged at these sizes (a 5 s P99 rests on too few requests)
        assert {(c, "TTFT P50 (ms)"), (c, "TPOT P50 (ms)"), (c, "output tok/s")} <= judged
    assert re.search(r"\*\*2 of 2 cross-checked steps agree\.\*\*", report)
    # every window against the server's own histograms
    hist = report.split("## Client vs the server's own histograms", 1)[1].split("\n## ", 1)[0]
    assert "| TTFT P50 |" in hist and "| ITL P50 |" in hist and "**DIFFERS**" not in hist
    html = (tmp_path / "reports" / "cc" / "report.html").read_text()
    assert "Cross-check: an independent client on the same server" in html and "reference-h11" in html


@pytest.mark.slow
def test_crosscheck_flags_a_reference_that_sees_replies_late(tmp_path: Path) -> None:
    with sim_server() as url:
        port = int(url.rsplit(":", 1)[1])
        with delay_proxy(port, 0.3) as slow:
            proc, db = _crosscheck(tmp_path, "[8]", "--reference", "h11", "--launcher", "attach", "--no-fail",
                                   "--set", f"server.url={url}", "--set", f"crosscheck.reference_url={slow}")
    assert proc.returncode == 0, proc.stderr[-3000:]  # --no-fail: the difference is reported, not an exit code
    assert "cross-check c=8: reference-h11 DIFFERS" in proc.stderr
    assert "cross-check DIFFERS (--no-fail): c=8" in proc.stderr
    con = sqlite3.connect(db)
    ttft = dict(con.execute("SELECT driver, ttft_p50_ms FROM runs").fetchall())
    assert ttft["reference-h11"] >= 300.0  # every reply, the first token's included, came through the delay line
    assert ttft["reference-h11"] > ttft["http"]
    table = _reference_table((tmp_path / "reports" / "cc" / "report.md").read_text())
    verdict = {row[3]: row[8] for row in table}
    assert verdict["TTFT P50 (ms)"] == "**DIFFERS**"
    assert verdict["output tok/s"] == "**DIFFERS**"  # closed loop: 300 ms more per request is fewer requests
    assert verdict["TPOT P50 (ms)"] == "agrees"  # a delay line shifts every token alike


@pytest.mark.slow
def test_crosscheck_exits_6_when_sweeps_own_connection_is_late(tmp_path: Path) -> None:
    """Issue 23 §14: a 60 ms delay line on sweep's own connection was flagged in the report and nowhere else (exit
    0). A figure that differs is exit 6 (CrossCheckDiffers) with one line naming the step and the figures."""
    with sim_server() as url:
        port = int(url.rsplit(":", 1)[1])
        with delay_proxy(port, 0.06) as slow:
            proc, db = _crosscheck(tmp_path, "[8]", "--reference", "h11", "--launcher", "attach",
                                   "--set", f"server.url={slow}", "--set", f"crosscheck.reference_url={url}")
    assert proc.returncode == 6, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: cross-check DIFFERS at 1 step(s): c=8 (run "), proc.stderr[-3000:]
    assert "TTFT P50 (ms)" in last and "reference-h11" in last
    assert "Traceback" not in proc.stderr
    con = sqlite3.connect(db)  # measured and stored all the same: the exit code is the verdict, not a failure
    assert {d for (d,) in con.execute("SELECT driver FROM runs WHERE status = 'completed'")} == {"http",
                                                                                             "reference-h11"}
    assert (tmp_path / "reports" / "cc" / "report.md").exists()


@pytest.mark.parametrize(("extra", "message"), [
    (["--reference", "bench_serving"], "crosscheck.reference=bench_serving: sglang is not importable here"),
])
def test_a_crosscheck_that_cannot_run_is_one_line_and_stores_nothing(tmp_path: Path, extra: list[str],
                                                                    message: str) -> None:
    if "bench_serving" in extra and importlib.util.find_spec("sglang") is not None:
        pytest.skip("sglang is importable here")
    proc, db = _crosscheck(tmp_path, "[4]", *extra)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("error: ") and message in lines[-1], proc.stderr
    assert "Traceback" not in proc.stderr
    if db.exists():  # at most an empty, migrated database: no study, no run
        con = sqlite3.connect(db)
        assert con.execute("SELECT count(*) FROM sweep_studies").fetchone()[0] == 0
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 0


SESSIONS = """
  shared_prefix: {groups: 2, length: 64, share: 0.5}
  sessions:
    turns: {kind: uniform, low: 2, high: 4}
    followup_len: {kind: fixed, value: 24}
    think_time: {kind: fixed, value: 0.05}
    fanout: {kind: uniform, low: 1, high: 2}
arrival: {kind: closed}"""


@pytest.mark.slow
def test_crosscheck_replays_sessions_and_stores_their_figures(tmp_path: Path) -> None:
    """A sessions profile: the reference replays the same sessions, both rows store the session columns (issue 31
    §4), and the report judges the session figures alike."""
    prof = tmp_path / "crosscheck-ci.yaml"
    prof.write_text(PROFILE.replace("LADDER", "[4]").replace("\narrival: {kind: closed}", SESSIONS)
                    .replace("num_requests: 3000", "num_requests: 300"))
    db = tmp_path / "results.db"
    proc = subprocess.run([sys.executable, "-m", "sweep.cli", "crosscheck", "--profile", str(prof), "--db", str(db),
                           "--out", str(tmp_path / "reports"), "--study", "cc", "--config", "max_running_requests=16",
                           "--reference", "h11"], capture_output=True, text=True, timeout=400, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    con = sqlite3.connect(db)
    rows = con.execute("SELECT driver, sessions_completed, cache_hit_later, later_prompt_tokens FROM runs "
                       "ORDER BY id").fetchall()
    assert [r[0] for r in rows] == ["http", "reference-h11"]
    assert all(r[1] > 10 and r[2] > 0.3 and r[3] > 100 for r in rows), rows
    # the reference's later turns resend the conversation: stored with their turn and context like sweep's
    assert con.execute("SELECT count(*) FROM requests r JOIN runs u ON u.id = r.run_id WHERE u.driver = "
                       "'reference-h11' AND r.turn > 1 AND r.context_tokens > 0").fetchone()[0] > 20
    table = _reference_table((tmp_path / "reports" / "cc" / "report.md").read_text())
    figures = {row[3]: row[8] for row in table}
    for name in ("sessions completed", "session time P50 (s)", "cache hit, turns 2+", "prompt tokens, turns 2+"):
        assert figures[name] == "agrees", table
