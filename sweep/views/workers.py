"""Who measures what in a study: one row per worker, read from the store (sweep_workers, server_configs, runs).

What the fleet's progress lines, the live page and `sweep runs` say about workers comes from here, so a study
several workers share (on one host or many) reads the same everywhere:

- a worker is named by its label (`--label`, the fleet's `gpu0-1`, else `host:pid`), shown with its host and
  the GPU group its servers got;
- what it does now: `measuring PHASE CONFIG c=N` while one of its windows runs, `launching CONFIG` while a
  configuration of its is starting (or between windows), `idle` otherwise; a worker that stopped says `done`
  or `lost` (found dead by another worker);
- windows done and configurations done are its completed runs and its configurations whose ladder ended.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from sweep.analysis.loads import load_text
from sweep.core.types import Cell
from sweep.store.records import ConfigRecord, RunRecord, RunSummary, WorkerRecord, labels_of

CONFIG_DONE = ("completed", "infeasible")


@dataclass(frozen=True)
class WorkerActivity:
    """One worker of a study and what it is doing."""

    worker_id: int | None
    worker: str  # its label
    host: str | None
    gpus: str | None  # CUDA_VISIBLE_DEVICES of its servers
    status: str  # running | done | lost
    now: str  # measuring ... | launching ... | idle | done | lost
    windows_done: int
    configs_done: int

    def line(self) -> str:
        """One progress line (after the worker's name): where it runs, what it has done, what it does now."""
        where = " ".join(p for p in (self.host, f"GPU {self.gpus}" if self.gpus else None) if p)
        return (f"on {where or 'an unknown host'}: {_count(self.windows_done, 'window')} over "
                f"{_count(self.configs_done, 'configuration')}; {self.now}")


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def activity(workers: Sequence[WorkerRecord], configs: Sequence[ConfigRecord],
             runs: Sequence[RunRecord]) -> list[WorkerActivity]:
    """Every worker that joined the study, in joining order; aborted attempts are not work done."""
    label_of = labels_of(configs)
    out = []
    for w in workers:
        mine = [r for r in runs if r.placement.worker_id == w.id and r.status != "aborted"]
        running = [r for r in mine if r.status == "running"]
        starting = [c for c in configs if c.placement.worker_id == w.id and c.status in ("pending", "running")]
        if w.status != "running":
            now = str(w.status)
        elif running:
            r = running[-1]
            now = f"measuring {r.phase} {label_of.get(r.server_config_id, '?')} {load_text(r.concurrency, r.offered_rps)}"
        elif starting:
            now = f"launching {label_of[starting[-1].id]}"
        else:
            now = "idle"
        done = sum(c.placement.worker_id == w.id and c.status in CONFIG_DONE for c in configs)
        out.append(WorkerActivity(w.id, w.label, w.host, w.gpus, str(w.status), now,
                                  sum(r.status == "completed" for r in mine), done))
    return out


def worker_labels(workers: Iterable[WorkerRecord]) -> dict[int, str]:
    """sweep_workers id -> label."""
    return {w.id: w.label for w in workers if w.id is not None}


def with_worker_labels(rows: Sequence[RunSummary], labels: Mapping[int, str]) -> list[dict[str, Cell]]:
    """Run rows as columns with a `worker` entry: the label of the worker that measured them ("" where none is
    recorded)."""
    out = []
    for row in rows:
        wid = row.run.placement.worker_id
        out.append({**row.columns(), "worker": labels.get(wid, f"worker {wid}") if wid is not None else ""})
    return out
