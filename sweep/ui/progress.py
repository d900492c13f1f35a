"""What a study prints while it runs: one result line per window, and live bars on a terminal.

On a terminal (stderr is a TTY) two bars sit under the result lines: the study (its steps done of those
planned) and the current window. Both bars run on the driver's own clock (simulated seconds with the virtual
driver), and each ETA is the driver's seconds left at the bar's average pace since it started (driver seconds
per wall second): the study's weighs a final window as 1/fraction screens and the soak as its duration.
Nothing assumes a width: rich measures the terminal, the bars are narrow and every line fits 80 columns.
In a pipe (stderr not a TTY: a log read in the morning) there are no bars: each line starts with the local
time (`2026-12-01 03:12:45`), each finished window prints one plain line with `[done/total]` after it, and each
server prints a line when it is launched, when it is ready (after how many seconds) or failed, and when it stops.

Every result line says its phase (screen, final or soak) and, with several workers, the worker's name.
The study count never passes its total: the plan grows when a phase turns out larger than planned and
shrinks when a ladder stops early. Until the study ends the total is the plan's most (every ladder climbing on
past its top and refined to refine.max_steps; ladders that stop early bring it down, interactive's 105 to about
73), so the count says `12/≤105` and the study's ETA `ETA ≤`: an upper bound, never read as the expected end.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from sweep.ui.console import make_console

if TYPE_CHECKING:  # the measuring commands load these; a reading command imports this module for its console
    from sweep.analysis.ladder_steps import LadderStep
    from sweep.analysis.run_stats import RunStats
    from sweep.core.types import ServerConfig
    from sweep.ladder.launch import ServerEvent
    from sweep.ladder.runner import LadderOutcome, StepStart
    from sweep.profile import Profile
    from sweep.views.plan import PlanPriorFigures

WIDE = 120  # at least this many columns: one result line per window, else a head line and a numbers line
LABEL_CHARS = 34  # a bar's description is cut to this, so the bars fit 80 columns




def stamp(line: str) -> str:
    """A log line led by the local time to the second."""
    return f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}"


class StampedConsole:
    """A console whose lines are led by the local time where it is not a terminal (a log), as they are."""

    def __init__(self, console: Console):
        self.console = console

    def print(self, msg: str, /, *, markup: bool | None = None, highlight: bool | None = None) -> None:
        self.console.print(msg if self.console.is_terminal else stamp(msg), markup=markup, highlight=highlight)


def eta_seconds(task: Task) -> float | None:
    """What is left of a bar at its average pace since it started: driver seconds per wall second over the
    whole study (launches, and storing a window's records, included), not rich's last 30 s, which ran fast
    screens' pace into the finals and the soak (ETAs half the time left)."""
    if task.total is None or task.elapsed is None or task.completed <= 0:
        return None
    return max(0.0, task.total - task.completed) * task.elapsed / task.completed


def clock(seconds: float | None) -> str:
    """H:MM:SS, as rich writes a time; -:--:-- when unknown."""
    if seconds is None:
        return "-:--:--"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes // 60:d}:{minutes % 60:02d}:{secs:02d}"


class AverageEta(ProgressColumn):
    """An ETA column at eta_seconds (rich's TimeRemainingColumn is at the last 30 s's pace)."""

    def render(self, task: Task) -> Text:
        return Text(clock(eta_seconds(task)), style="progress.remaining")


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def result_lines(phase: str, label: str, concurrency: int, stats: RunStats, width: int,
                 worker: str | None = None, percentiles: tuple[int, int] = (99, 99),
                 client_why: tuple[str, ...] = (), offered_rps: float | None = None) -> list[str]:
    """A finished window as rich-markup lines: one line when `width` allows, else two that fit 80 columns
    (when the SLA's failure reasons do not fit beside the head, each gets a line of its own).
    TTFT and TPOT are shown at the SLA's percentiles (`percentiles`). A client-bound window says so, with
    `client_why` (sweep.analysis.measure.client_bound_reasons) when given. A window of an open-loop rate ladder
    (`offered_rps`) is named by its rate, never by its concurrency (only its in-flight cap there)."""
    word = "[green]pass[/]" if stats.passes_sla else "[red]fail[/]"
    why = "" if stats.passes_sla else (stats.sla_failures or "")
    verdict = f"{word} {escape(why)}".rstrip()
    bound = [f"[yellow]client-bound: {escape(r)}[/]" for r in client_why or ("the load generator may have limited "
                                                                            "this window",)] if stats.client_bound else []
    who = f"{worker} " if worker else ""
    from sweep.analysis.loads import load_text

    load = f"in-flight cap {concurrency}" if phase == "soak" else load_text(concurrency, offered_rps)
    head = f"{who}{phase:<6} {label} {load}"
    pt, pp = percentiles
    ttft = (stats.percentile_ms("ttft", pt) or 0) / 1000
    nums = (f"goodput {stats.goodput_tps or 0:,.0f} tok/s  TTFT p{pt} {ttft:.2f} s  "
            f"TPOT p{pp} {stats.percentile_ms('tpot', pp) or 0:.1f} ms  thr {stats.output_tps or 0:,.0f}  "
            f"retr {stats.retractions or 0}")
    extra = [f"    {b}" for b in bound]
    if width >= WIDE:
        return [f"{head}  {nums}  {verdict}" + "".join(f"  {b}" for b in bound)]
    if Text.from_markup(f"{head}  {verdict}").cell_len <= width:
        return [f"{head}  {verdict}", f"    {nums}", *extra]
    return [f"{head}  {word}", f"    {nums}", *(f"    {escape(reason)}" for reason in why.split("; ")), *extra]


class StudyProgress:
    """The study's terminal output: result lines always, bars only on a terminal and when `enabled`."""

    def __init__(self, prof: Profile, enabled: bool, console: Console | None = None, worker: str | None = None):
        self.console = console or make_console()
        self.worker = worker
        self.percentiles = (int(prof.sla.ttft_percentile), int(prof.sla.tpot_percentile))
        self.sla = prof.sla
        self.live = enabled and self.console.is_terminal
        from sweep.profile.phases import ladder_windows, phase_seconds
        from sweep.views.plan import study_plan

        # a final ladder may run refine.max_steps refinement windows beyond its steps
        self.per_configs = {phase: ladder_windows(prof, phase) for phase in ("screen", "final")}

        self.prof = prof
        plan = study_plan(prof)
        self.lengths = {phase: phase_seconds(prof, phase) for phase in ("screen", "final", "refine", "soak")}
        # the count says steps; the bar (and so its ETA) runs on the driver's seconds: a final window is
        # 1/fraction screens long, and the soak is one step of an hour
        self.total, self.plan_s = plan.steps, plan.seconds
        self.done, self.done_s = 0, 0.0
        self.done_in_config = 0
        self.phase = "screen" if prof.search.screening.enabled else "final"
        self.bound = True  # the total is the plan's most until the study ends (see the module docstring)
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(bar_width=12),
                                 TextColumn("{task.fields[count]}"), TimeElapsedColumn(),
                                 TextColumn("{task.fields[eta]}"),
                                 AverageEta(), console=self.console, disable=not self.live,
                                 transient=False)
        self.study: TaskID = self.progress.add_task("study", total=self.plan_s, count=self._count(), eta="ETA ≤")
        self.step: TaskID = self.progress.add_task("step", total=1, visible=False, count="", eta="ETA")
        self._timer: threading.Event | None = None
        self._lock = threading.Lock()  # the tick thread's updates against step_done's

    def replan(self, figures: PlanPriorFigures) -> None:
        """The plan again with the simulated prior's survivors and predicted knees (Orchestrator.knee's on_prior,
        once the prior has ranked the space): the total and the ETA from then on, never below what is done."""
        from sweep.views.plan import study_plan

        plan = study_plan(self.prof, figures)
        with self._lock:
            self.total, self.plan_s = max(plan.steps, self.done), max(plan.seconds, self.done_s)
            self._show_study()

    def _count(self) -> str:
        """`done/≤most` while the total is an upper bound, `done/total` once the study has ended."""
        return f"{self.done}/{'≤' if self.bound else ''}{self.total}"

    def _show_study(self, in_step_s: float = 0.0) -> None:
        self.total = max(self.total, self.done)  # a count never passes its total
        self.plan_s = max(self.plan_s, self.done_s + in_step_s)
        self.progress.update(self.study, total=self.plan_s, completed=self.done_s + in_step_s, count=self._count(),
                             description=_clip(f"study ({self.phase})", LABEL_CHARS),
                             eta="ETA ≤" if self.bound else "ETA")

    def __enter__(self) -> StudyProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self._stop_timer()
        if exc_type is None:  # the study finished: what ran was the whole plan
            self.total, self.plan_s, self.bound = self.done, self.done_s, False
            self._show_study()
        self.progress.update(self.step, visible=False)
        self.progress.__exit__(None, None, None)

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.set()
            self._timer = None

    def step_start(self, start: StepStart) -> None:
        """A window begins: the step bar follows the driver's clock toward warm-up + window + drain."""
        self._stop_timer()
        if start.phase != self.phase:
            self.phase = start.phase
            self._show_study()
        if not self.live:
            return
        stop = threading.Event()
        self._timer = stop
        expected = max(start.expected_s, 1.0)
        desc = _clip(f"{start.phase} {start.config.label()} c={start.concurrency}", LABEL_CHARS)
        self.progress.reset(self.step, total=expected, visible=True, description=desc, count=f"0/{expected:.0f} s",
                            eta="ETA")  # reset replaces the fields
        t0 = time.monotonic()

        def tick() -> None:
            last, driver = 0.0, False  # the wall clock only for a driver that never says
            while not stop.wait(0.25):
                elapsed = start.elapsed()
                driver = driver or elapsed is not None
                # None once the window is over (a soak's hour of records being stored): stay where it was
                at = elapsed if elapsed is not None else last if driver else time.monotonic() - t0
                at = last = min(max(at, last), expected)
                with self._lock:
                    if stop.is_set():  # the step ended meanwhile: its seconds are in done_s now
                        return
                    self.progress.update(self.step, completed=at, count=f"{at:.0f}/{expected:.0f} s")
                    self._show_study(min(at, self.lengths.get(start.phase, expected)))

        threading.Thread(target=tick, daemon=True).start()

    def step_done(self, config: ServerConfig, concurrency: int, step: LadderStep) -> None:
        phase = step.phase or self.phase
        with self._lock:
            self._stop_timer()
            self.done += 1
            self.done_s += self.lengths.get(phase, 0.0)
        if phase != "soak":
            self.done_in_config += 1
        self._show_study()
        from sweep.analysis.measure import client_bound_reasons

        client_why = client_bound_reasons(step.stats.client, self.sla) if step.stats.client_bound else ()
        lines = result_lines(phase, config.label(), concurrency, step.stats, self.console.width, self.worker,
                             self.percentiles, client_why, step.offered_rps)
        if not self.live:  # a pipe: one plain line per window, stamped and counted
            text = "  ".join([escape(f"[{self._count()}] ") + lines[0], *(ln.strip() for ln in lines[1:])])
            self.console.print(stamp(text), markup=True, highlight=False, soft_wrap=True)
            return
        for line in lines:
            self.console.print(line, highlight=False)

    def server(self, event: ServerEvent) -> None:
        """A server launched, ready, failed or stopped: a stamped line where there are no bars (a pipe)."""
        if not self.live:
            who = f"{self.worker} " if self.worker else ""
            self.console.print(stamp(f"{who}{event.line()}"), markup=False, highlight=False, soft_wrap=True)

    def peer_step_done(self, phase: str) -> None:
        """A window another worker of the study stored: the study's count and bar are the whole study's."""
        with self._lock:  # the feed's thread against the tick thread's and step_done's updates
            self.done += 1
            self.done_s += self.lengths.get(phase, 0.0)
            self._show_study()

    def trial_done(self, outcome: LadderOutcome) -> None:
        """A ladder stopped early (saturation, pruning, launch failure, reuse): its unrun steps leave the plan."""
        skipped = max(0, self.per_configs.get(self.phase, 0) - self.done_in_config)
        self.total = max(self.done, self.total - skipped)
        self.plan_s = max(self.done_s, self.plan_s - skipped * self.lengths.get(self.phase, 0.0))
        self.done_in_config = 0
        self._show_study()
