"""What a person sees: a real study on the virtual driver in an 80-column pseudo-terminal, and in a pipe.

The pty's output is played through pyte (a VT terminal emulator), so the assertions are about the screen
a person would read: the study bar once (not wrapped and repeated), every result line once with its phase.
"""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

import pyte
import pytest
from rich.console import Console

from sweep.analysis.ladder_steps import LadderStep
from sweep.analysis.run_stats import RunStats
from sweep.core.types import ServerConfig
from sweep.ladder.runner import LadderOutcome, StepStart
from sweep.profile import load_profile
from sweep.ui.progress import StudyProgress, eta_seconds, result_lines

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "profiles" / "smoke.yaml"
STAMP = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (.*)$")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
# screening on (screen + final phases) and the soak: all three phases print result lines
ARGS = ["knee", "--profile", str(SMOKE), "--driver", "virtual", "--soak", "--study", "term",
        "--set", "search.screening.enabled=true", "--set", "search.screening.fraction=0.5"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    env.update(TERM="xterm-256color", PYTHONPATH=str(ROOT))
    return env


def run_in_pty(args: list[str], cwd: Path, cols: int = 80, rows: int = 200, deadline_s: float = 240) -> str:
    """Run `sweep` with stdin/stdout/stderr on a pty of cols x rows; everything it wrote, as decoded text."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "sweep.cli", *args], stdin=slave, stdout=slave, stderr=slave,
                            cwd=cwd, env=_env(), close_fds=True)
    os.close(slave)
    out = bytearray()
    end = time.monotonic() + deadline_s
    try:
        while time.monotonic() < end:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the child closed the pty
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
        assert proc.wait(timeout=max(1.0, end - time.monotonic())) == 0, out.decode(errors="replace")[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return out.decode(errors="replace")


def screen_of(raw: str, cols: int = 80, rows: int = 200) -> list[str]:
    screen = pyte.Screen(cols, rows)
    stream = pyte.Stream(screen)
    stream.feed(raw.replace("\n", "\r\n"))  # the pty's onlcr, which pyte does not do itself
    return [line.rstrip() for line in screen.display if line.strip()]


@pytest.mark.integration
def test_an_80_column_terminal_shows_each_line_once_with_its_phase(tmp_path: Path) -> None:
    raw = run_in_pty([*ARGS, "--db", str(tmp_path / "r.db"), "--out", str(tmp_path / "rep")], tmp_path)
    lines = screen_of(raw)
    text = "\n".join(lines)
    study = [ln for ln in lines if ln.startswith("study (")]
    assert len(study) == 1, text  # the bar is redrawn in place, never wrapped into copies
    heads = [ln for ln in lines if re.match(r"(screen|final|soak)\s+mrr=", ln)]
    assert len(heads) == len(set(heads)), text
    assert {h.split()[0] for h in heads} == {"screen", "final", "soak"}, text
    assert sum(h.startswith("screen") for h in heads) == 6  # 2 configurations x 3 steps
    for head in heads:  # the numbers line follows its head line, whole
        nxt = lines[lines.index(head) + 1]
        assert nxt.startswith("    goodput ") and nxt.rstrip().split()[-2] == "retr", text
    # every study count drawn, at any moment, stays within its total; the last one is the whole plan
    counts = [(int(a), int(b)) for a, b in re.findall(r"study \(\w+\)\D*?(\d+)/≤?(\d+)", ANSI.sub("", raw))]
    assert counts and all(a <= b for a, b in counts), counts
    done, total = map(int, re.search(r"(\d+)/(\d+)", study[0]).groups())  # type: ignore[union-attr]
    assert done == total == len(heads)


@pytest.mark.integration
def test_a_pipe_gets_plain_counted_lines(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "sweep.cli", *ARGS, "--db", str(tmp_path / "r.db"), "--out",
                           str(tmp_path / "rep"), "--live", "--live-port", "0"], capture_output=True, text=True,
                          timeout=240, cwd=tmp_path, env=_env())
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^live page http://127\.0\.0\.1:\d+/$", proc.stderr, re.M), proc.stderr  # --live
    assert "\x1b" not in proc.stderr and "\r" not in proc.stderr
    # an overnight log: every line of the study led by the local time, each server's life a line per event
    stamped = [m.groups() for m in map(STAMP.match, proc.stderr.splitlines()) if m]
    assert stamped and all(abs(datetime.strptime(t, "%Y-%m-%d %H:%M:%S") - datetime.now()) < timedelta(minutes=5)
                           for t, _ in stamped)
    logged = [text for _, text in stamped]
    servers = [re.match(r"(launching|ready|stopped|failed) (mrr=\S+ mem=\S+) \((\w+)\)", t) for t in logged]
    events = [m.groups() for m in servers if m]
    assert [e[2] for e in events if e[0] == "launching"] == ["screen", "screen", "final", "soak"], logged
    for i, (what, label, phase) in enumerate(events):  # launching, ready, stopped: in that order, per server
        assert what == ("launching", "ready", "stopped")[i % 3], events
        assert (label, phase) == events[i - i % 3][1:], events
    assert all(re.search(r"\) after \d+ s$", t) for t in logged if t.startswith("ready "))
    counted = [t for t in logged if t.startswith("[")]
    assert len(counted) == len([ln for ln in proc.stderr.splitlines() if "goodput" in ln and "TTFT" in ln])
    pairs = [tuple(map(int, re.match(r"\[(\d+)/≤(\d+)\]", ln).groups())) for ln in counted]  # type: ignore[union-attr]
    assert [a for a, _ in pairs] == list(range(1, len(pairs) + 1))
    assert all(a <= b for a, b in pairs), pairs
    phases = [ln.split()[1] for ln in counted]
    assert phases[:6] == ["screen"] * 6 and phases[-1] == "soak" and "final" in phases
    assert all("goodput" in ln and "TTFT p95" in ln and "TPOT p95" in ln for ln in counted)  # smoke's SLA
    assert "soak" in counted[-1] and "in-flight cap 1024" in counted[-1]


def test_the_step_eta_runs_on_the_drivers_clock() -> None:
    """A 30 s simulated window that runs at 10 simulated seconds per wall second ends in ~3 s, not 30."""
    console = Console(file=io.StringIO(), force_terminal=True, width=80)
    prof = load_profile(SMOKE, {})
    t0 = time.monotonic()
    start = StepStart(ServerConfig(max_running_requests=8), 4, "final", 30.0, lambda: (time.monotonic() - t0) * 10)
    with StudyProgress(prof, True, console) as bars:
        bars.step_start(start)
        deadline = time.monotonic() + 10
        eta = None
        while time.monotonic() < deadline:
            task = bars.progress.tasks[bars.step]
            if task.completed > 0 and eta_seconds(task) is not None:
                eta = eta_seconds(task)
                break
            threading.Event().wait(0.05)
        bars.step_done(start.config, 4, LadderStep(1, 4, "final", RunStats.from_row({"passes_sla": True})))
    assert eta is not None and eta < 3.5, eta


def test_counts_never_pass_their_totals_when_the_finals_outnumber_the_plan() -> None:
    console = Console(file=io.StringIO(), force_terminal=False, width=80)
    prof = load_profile(SMOKE, {"soak.enabled": False})
    bars = StudyProgress(prof, False, console)
    cfg = ServerConfig(max_running_requests=4)
    for i in range(bars.total + 5):
        bars.step_done(cfg, 2, LadderStep(i, 2, "final", RunStats.from_row({"passes_sla": True, "goodput_tps": 1.0 + i})))
        assert bars.done <= bars.total
    printed = console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert STAMP.sub(r"\2", printed[-1]).startswith(f"[{bars.total}/≤{bars.total}] final")


def test_a_failed_window_at_80_columns_keeps_its_reasons_whole_on_lines_that_fit() -> None:
    """The interactive profile's failing steps: head + 'fail TTFT P95 ... > 1000 ms' is wider than 80 columns;
    rich wrapped it, leaving a lone 'ms' line. Each reason now gets a line of its own."""
    why = "TTFT P95 5778 ms > 1000 ms; error rate 0.020 > 0.010"
    stats = RunStats.from_row({"passes_sla": False, "sla_failures": why, "goodput_tps": 1253.0, "ttft_p95_ms": 5778.0})
    label = "mrr=16 mem=0.6 chunk=2048 policy=lpm"
    console = Console(file=io.StringIO(), force_terminal=True, width=80, color_system=None)
    for line in result_lines("screen", label, 32, stats, 80, percentiles=(95, 95)):
        console.print(line, highlight=False)
    shown = console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert shown[0] == f"screen {label} c=32  fail"
    assert shown[1].startswith("    goodput 1,253 tok/s  TTFT p95 5.78 s")
    assert shown[2:] == ["    TTFT P95 5778 ms > 1000 ms", "    error rate 0.020 > 0.010"]
    short = result_lines("screen", "mrr=4", 32, stats, 80, percentiles=(95, 95))
    assert len(short) == 2 and short[0].endswith(f"[/] {why}")  # beside the head when it fits


def test_a_client_bound_window_says_why_in_the_terminal() -> None:
    """Issue 23 §17: a window marked client-bound by one 1.4 s event-loop stall says so, with the rule it broke,
    on its result line (wide), or on a line of its own (80 columns); a window the client kept up with says nothing."""
    from sweep.analysis.ladder_steps import LadderStep
    from sweep.analysis.measure import compute_stats
    from sweep.core.types import ServerConfig
    from tests.analysis.test_measure import client, five_requests, window

    prof = load_profile(SMOKE, {})
    sla = prof.sla.model_copy(update={"ttft_ms": 2000.0})
    prof = prof.model_copy(update={"sla": sla})
    # five requests: a window of its own that passes (min_requests=5), so only the client-bound line is new
    stalled = compute_stats(window(five_requests(), client=(client(lag_ms=2.0, stall_ms=1400.0),)), sla,
                            min_requests=5)
    calm = compute_stats(window(five_requests(), client=(client(lag_ms=2.0, stall_ms=50.0),)), sla, min_requests=5)
    assert stalled.client_bound and not calm.client_bound
    for width, n_lines in ((200, 1), (80, 3)):
        console = Console(file=io.StringIO(), force_terminal=False, width=width, color_system=None)
        bars = StudyProgress(prof, enabled=False, console=console)
        bars.step_done(ServerConfig(), 8, LadderStep(1, 8, "final", stalled, 1))
        bars.step_done(ServerConfig(), 16, LadderStep(2, 16, "final", calm, 1))
        text = console.file.getvalue()  # type: ignore[attr-defined]
        assert text.count("client-bound: event-loop stall 1,400 ms > 200 ms") == 1, text
        assert "client-bound" not in text.split("c=16", 1)[1], text
        lines = result_lines("final", "mrr=8", 8, stalled, width, client_why=("event-loop stall 1,400 ms > 200 ms",))
        assert len(lines) == n_lines and lines[-1].endswith("client-bound: event-loop stall 1,400 ms > 200 ms[/]")


def test_the_study_bar_runs_on_driver_seconds_so_a_final_or_the_soak_weighs_its_length() -> None:
    """smoke with screening (fraction 0.5) and the soak: 6 screen windows of 6.5 s, the one final ladder of 3 x 8 s
    and a 10 s soak = 73 s of the driver's clock. Counted as 10 equal steps, a final window weighed as much as a
    screen and an hour's soak as one step of seventy."""
    console = Console(file=io.StringIO(), force_terminal=False, width=80)
    prof = load_profile(SMOKE, {"search.screening.enabled": True, "search.screening.fraction": 0.5,
                                "soak.enabled": True})
    bars = StudyProgress(prof, False, console)
    study = bars.progress.tasks[bars.study]
    assert (bars.total, study.total) == (10, 73.0)
    cfg = ServerConfig(max_running_requests=4)
    first = LadderStep(1, 2, "screen", RunStats.from_row({"passes_sla": True}))
    bars.step_done(cfg, 2, first)
    # the ladder stopped after one step: its two unrun screens leave the plan
    bars.trial_done(LadderOutcome(cfg, 1, "completed", [first], stop_reason="saturated"))
    assert (bars.done, bars.total, study.completed, study.total) == (1, 8, 6.5, 60.0)
    bars.step_done(cfg, 2, LadderStep(2, 2, "soak", RunStats.from_row({"passes_sla": True})))
    assert study.completed == 16.5 and study.remaining == 43.5


def test_the_step_bar_stays_put_when_the_driver_clock_stops_after_the_window() -> None:
    """The soak's window ends at 3610 of 3690 s, then storing its records takes a minute: the driver says None
    (between windows) and the bar fell back to wall seconds since the start (34 s) and ran up from there."""
    console = Console(file=io.StringIO(), force_terminal=True, width=80)
    prof = load_profile(SMOKE, {})
    said = iter([5.0, 10.0])
    asked = threading.Event()
    calls = [0]

    def elapsed() -> float | None:
        calls[0] += 1
        if calls[0] >= 6:
            asked.set()
        return next(said, None)

    start = StepStart(ServerConfig(max_running_requests=8), 4, "soak", 30.0, elapsed)
    with StudyProgress(prof, True, console) as bars:
        bars.step_start(start)
        assert asked.wait(10)
        task = bars.progress.tasks[bars.step]
        assert task.completed == 10.0, task.completed
        bars.step_done(start.config, 4, LadderStep(1, 4, "soak", RunStats.from_row({"passes_sla": True})))


def test_the_eta_is_the_average_pace_since_the_start_not_the_last_30_seconds() -> None:
    """Fast screens then slow finals: rich's 30 s window ran the screens' pace into the finals (interactive's
    study ETA said 0:50 with 1:54 left). 60 of 100 driver seconds in 12 wall seconds: 40 more take 8."""
    from rich.progress import Progress

    now = [0.0]
    progress = Progress(get_time=lambda: now[0])
    task_id = progress.add_task("study", total=100)
    for t, done in ((10.0, 20.0), (12.0, 60.0)):
        now[0] = t
        progress.update(task_id, completed=done)
    task = progress.tasks[task_id]
    assert eta_seconds(task) == 8.0
    assert task.time_remaining == 2.0  # rich's own, at the last burst's pace


def test_a_fleet_counts_the_study_as_the_live_page_does_once_per_change(tmp_path: Path) -> None:
    """`sweep sweep --gpus 0,1` printed each worker's windows and state, but no count of the study and no ETA."""
    from sweep.fleet.gpus import FleetProgress
    from sweep.store import Store

    prof = load_profile(SMOKE, {})
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    sid = store.create_study("pair", "smoke", prof.model_dump_json(), prof.fingerprint(), "grid", True, "virtual",
                             "optuna-pair")
    first = store.create_server_config(sid, ServerConfig(max_running_requests=4), "sim", [], 0)
    store.update_server_config(first, status="completed")
    store.create_server_config(sid, ServerConfig(max_running_requests=8), "sim", [], 1)
    console = Console(file=io.StringIO(), force_terminal=False, width=80)
    fleet = FleetProgress(store, sid, [], console)
    fleet.show()
    fleet.show()  # nothing changed: no second line
    counts = [ln for ln in console.file.getvalue().splitlines() if ln.lstrip().startswith("study (")]  # type: ignore[attr-defined]
    assert counts == ["  study (final): 1/2 configurations done, 1 running, 0 failed, ETA -:--:--"], counts


def test_the_study_total_says_it_is_an_upper_bound_until_the_study_ends() -> None:
    """interactive plans 105 steps at most (every ladder climbing on and refined to the full); a run measured 73,
    so the total shrank from 100-odd to 73 and the ETA read ~35% long early on: both say they are upper bounds."""
    from sweep.views.plan import study_plan

    prof = load_profile(ROOT / "profiles" / "interactive.yaml", {})
    most = study_plan(prof).steps
    console = Console(file=io.StringIO(), force_terminal=False, width=80)
    bars = StudyProgress(prof, False, console)
    with bars:
        task = bars.progress.tasks[bars.study]
        assert bars._count() == f"0/≤{most}" and task.fields["eta"] == "ETA ≤"
        cfg = ServerConfig(max_running_requests=4)
        bars.step_done(cfg, 8, LadderStep(1, 8, "screen", RunStats.from_row({"passes_sla": True})))
        assert f"[1/≤{most}]" in console.file.getvalue()  # type: ignore[attr-defined]
    task = bars.progress.tasks[bars.study]
    assert bars._count() == "1/1" and task.fields["eta"] == "ETA"  # what ran was the whole plan
