"""A study's cross-checked steps read back from the store: sweep's row of each step against its reference row.

The verdicts are recomputed by sweep.analysis.crosscheck with the given tolerance (the same judge as the report),
so `sweep crosscheck`'s exit code and the report's table never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

from sweep.analysis.crosscheck import CrossCheck, Tolerance, compare_runs
from sweep.store import Store


@dataclass(frozen=True)
class StepCheck:
    """One cross-checked step: sweep's run, the reference's run and the comparison of their figures."""

    run_id: int
    reference_run_id: int
    reference: str  # the reference's driver name
    concurrency: int
    check: CrossCheck

    def line(self) -> str:
        """The step's flagged figures in one phrase ("" when none differs)."""
        what = self.check.differences()
        return f"c={self.concurrency} (run {self.run_id} vs {self.reference} run {self.reference_run_id}): {what}" \
            if what else ""


def step_checks(store: Store, study_id: int, tol: Tolerance) -> list[StepCheck]:
    """Every step of a study where both sweep's window and its reference's completed, oldest first."""
    ours = {r.id: r for r in store.study_runs(study_id)}
    out = []
    for ref in store.reference_runs(study_id):
        mine = ours.get(ref.reference_for_run_id) if ref.reference_for_run_id is not None else None
        if mine is None or mine.status != "completed" or ref.status != "completed":
            continue
        out.append(StepCheck(mine.id, ref.id, ref.driver, mine.concurrency,
                             compare_runs(mine.columns(), ref.columns(), tol)))
    return out
