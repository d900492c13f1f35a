"""What the chaos night (tools/chaos.py) found, read from the study's database and the process table once it is over.

The counts: configurations measured exactly once (one verdict, each ladder step one completed window), runs lost
(a grid configuration without a verdict, a completed configuration missing a step, a window left `running`),
duplicates (a step with two completed windows outside aborted attempts; a configuration with two COMPLETE Optuna
trials), configurations with two verdicts, orphans (live processes left in the study's folder), and one outcome
line per injected fault.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import psutil
from chaos_faults import q

FINISHED = ("completed", "infeasible", "failed")


@dataclass(frozen=True)
class Injected:
    """One fault as the harness injected it, with what the study did about it."""

    n: int
    kind: str
    target: str
    at_s: float  # seconds since the chaos night started
    clock: str  # local wall-clock time
    detail: str
    outcome: str


@dataclass(frozen=True)
class Tally:
    """The numbers of one chaos night."""

    configurations: int
    measured_once: int
    lost: list[str]
    duplicates: list[str]
    two_verdicts: list[str]
    orphans: list[str]
    verdicts: Counter[str]
    aborted_attempts: int
    trials: Counter[str]

    @property
    def clean(self) -> bool:
        return (self.measured_once == self.configurations and not self.lost and not self.duplicates
                and not self.two_verdicts and not self.orphans)


def processes_in(folder: Path) -> list[str]:
    """Live processes (not zombies, not this one) whose working directory is in folder, as 'pid cmdline'."""
    found = []
    for p in psutil.process_iter():
        if p.pid == os.getpid():
            continue
        with contextlib.suppress(psutil.Error, OSError):
            if p.status() != psutil.STATUS_ZOMBIE and Path(p.cwd()).is_relative_to(folder):
                found.append(f"{p.pid} {' '.join(p.cmdline())[:100]}")
    return found


def tally(db: Path, study: str, n_configs: int, ladder_len: int, folder: Path) -> Tally:
    attempts = q(db, "SELECT id, config_key, status FROM server_configs")
    verdicts = [(k, s) for _, k, s in attempts if s in FINISHED]
    per_key = Counter(k for k, _ in verdicts)
    runs = q(db, "SELECT c.config_key, r.concurrency, r.phase FROM runs r JOIN server_configs c "
                 "ON c.id = r.server_config_id WHERE r.status = 'completed' AND c.status != 'aborted'")
    per_step = Counter(runs)
    steps_of = Counter(k for k, _, _ in runs)
    completed = {k for k, s in verdicts if s == "completed"}
    lost = [f"configuration {i + 1} of the grid never got a verdict" for i in range(max(0, n_configs - len(per_key)))]
    lost += [f"{k}: {steps_of[k]} of {ladder_len} steps" for k in sorted(completed) if steps_of[k] < ladder_len]
    lost += [f"run {rid} left running" for (rid,) in q(db, "SELECT id FROM runs WHERE status = 'running'")]
    lost += [f"attempt {cid} left {s}" for cid, _, s in attempts if s in ("running", "pending")]
    dups = [f"{k} at concurrency {c} ({ph}): {n} windows" for (k, c, ph), n in per_step.items() if n > 1]
    dups += _optuna_duplicates(db, study)
    once = sum(1 for k, n in per_key.items() if n == 1 and (k not in completed or steps_of[k] == ladder_len)
               and not any(key == k and n > 1 for (key, _, _), n in per_step.items()))
    return Tally(configurations=n_configs, measured_once=once, lost=lost, duplicates=dups,
                 two_verdicts=[f"{k}: {n} verdicts" for k, n in per_key.items() if n > 1],
                 orphans=processes_in(folder), verdicts=Counter(s for _, s in verdicts),
                 aborted_attempts=sum(1 for *_, s in attempts if s == "aborted"),
                 trials=Counter(s for (s,) in q(db, "SELECT state FROM trials")))


def _optuna_duplicates(db: Path, study: str) -> list[str]:
    """Grid points with two COMPLETE trials in Optuna's tables (surplus trials are pruned, never complete)."""
    rows = q(db, "SELECT t.trial_id, p.param_name, p.param_value FROM trials t JOIN studies s ON s.study_id = t.study_id "
                 "JOIN trial_params p ON p.trial_id = t.trial_id WHERE s.study_name = ? AND t.state = 'COMPLETE'",
             (study,))
    params: dict[int, list[tuple[str, float]]] = {}
    for tid, name, value in rows:
        params.setdefault(tid, []).append((name, value))
    phase = dict(q(db, "SELECT a.trial_id, a.value_json FROM trial_user_attributes a WHERE a.key = 'phase'"))
    seen = Counter((tuple(sorted(p)), phase.get(tid)) for tid, p in params.items())
    return [f"Optuna grid point {dict(p)} ({ph}): {n} COMPLETE trials" for (p, ph), n in seen.items() if n > 1]


def attempt_fate(db: Path, attempt_id: int) -> str:
    """What became of an attempt a fault struck, and of its configuration afterwards."""
    rows = q(db, "SELECT config_key, status, failure_reason, stop_reason FROM server_configs WHERE id = ?",
             (attempt_id,))
    if not rows:
        return f"attempt {attempt_id} not found"
    key, status, failure, stop = rows[0]
    why = (failure or stop or "").replace("\n", " ")[:110]
    later = q(db, "SELECT id, status FROM server_configs WHERE config_key = ? AND id != ? ORDER BY id",
              (key, attempt_id))
    text = f"attempt {attempt_id} {status}" + (f" ({why})" if why else "")
    if later:
        text += "; then " + ", ".join(f"attempt {i} {s}" for i, s in later)
    return text


def markdown(t: Tally, faults: list[Injected], header: list[str]) -> str:
    """The chaos night's table as Markdown (printed, and pasted into docs/chaos.md)."""
    kinds = Counter(f.kind for f in faults)
    lines = [*header, "", "| figure | value |", "| --- | --- |",
             f"| configurations in the grid | {t.configurations} |",
             f"| measured exactly once | {t.measured_once} |",
             f"| verdicts | {', '.join(f'{k} {n}' for k, n in sorted(t.verdicts.items()))} |",
             f"| attempts aborted (re-queued and measured again) | {t.aborted_attempts} |",
             f"| Optuna trials | {', '.join(f'{k} {n}' for k, n in sorted(t.trials.items()))} |",
             f"| runs lost | {len(t.lost)} |", f"| duplicates | {len(t.duplicates)} |",
             f"| configurations with two verdicts | {len(t.two_verdicts)} |",
             f"| orphans (processes left) | {len(t.orphans)} |",
             f"| faults injected | {len(faults)} ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))}) |"]
    for name, items in (("lost", t.lost), ("duplicates", t.duplicates), ("two verdicts", t.two_verdicts),
                        ("orphans", t.orphans)):
        lines += [f"- {name}: {item}" for item in items]
    lines += ["", "| # | at | clock | fault | target | what was done | outcome |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for f in faults:
        cells = [str(f.n), f"{f.at_s / 60:.1f} min", f.clock, f.kind, f.target, f.detail, f.outcome]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(lines) + "\n"
