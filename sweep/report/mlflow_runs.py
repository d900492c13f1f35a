"""A stored study as MLflow runs (`sweep export STUDY --format mlflow --tracking-uri URI`; the `mlflow` extra).

One MLflow experiment per profile (`sweep/<profile>`); in it a parent run per study, carrying the study's winner (the
read model's, sweep/views/read_model.py: the study_winners row where the study has ended) as params and metrics
and report.md as an artifact; under it a child run per configuration, carrying its knob values and phase as params
and, per measured ladder step, its goodput, output tok/s, TTFT/TPOT percentiles and SLA pass as metrics at
step = concurrency (MLflow plots a ladder as a curve). Nothing is read from MLflow back into the store.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from sweep.analysis.run_stats import RunStats
from sweep.core.errors import UsageError
from sweep.core.numbers import as_float

if TYPE_CHECKING:
    from sweep.store import Store
    from sweep.views.read_model import StudyReadModel

# Each step's metrics as MLflow logs them: the name, and the statistic (a field, so mypy checks each)
STEP_METRICS: tuple[tuple[str, Callable[[RunStats], float | bool | None]], ...] = (
    ("goodput_tps", lambda s: s.goodput_tps), ("output_tps", lambda s: s.output_tps),
    ("ttft_p50_ms", lambda s: s.ttft_p50_ms), ("ttft_p90_ms", lambda s: s.ttft_p90_ms),
    ("ttft_p99_ms", lambda s: s.ttft_p99_ms), ("tpot_p50_ms", lambda s: s.tpot_p50_ms),
    ("tpot_p90_ms", lambda s: s.tpot_p90_ms), ("tpot_p99_ms", lambda s: s.tpot_p99_ms),
    ("passes_sla", lambda s: s.passes_sla))
# "sweep" on PyPI is another project: the extra is installed from this checkout, or the package alone.
INSTALL = ("--format mlflow needs MLflow: pip install mlflow-skinny (or, in sweep's checkout, `make install`, or "
           "pip install -e '.[mlflow]')")


@dataclass(frozen=True)
class MlflowExport:
    """What an export wrote: the experiment, the parent run and one child run id per configuration id."""

    experiment_id: str
    parent_run_id: str
    child_run_ids: dict[int, str]
    report: Path | None  # the report.md logged as the parent's artifact (None: none found or written)


def load_mlflow() -> ModuleType:
    """The mlflow module; not installed: a UsageError saying how to install it (one line, exit 2)."""
    try:
        import mlflow
    except ImportError:
        raise UsageError(INSTALL) from None
    return mlflow


def _report_md(model: StudyReadModel, store: Store, scratch: Path) -> Path | None:
    """The study's report.md: the stored one where it still exists, else one written now into `scratch`."""
    stored = Path(model.study.report_path) if model.study.report_path else None
    if stored is not None and (stored / "report.md" if stored.is_dir() else stored).is_file():
        return stored / "report.md" if stored.is_dir() else stored
    try:
        from sweep.report.document import write_report
        from sweep.views.context import study_context

        return write_report(study_context(store, model.study.id), scratch).markdown
    except Exception:  # noqa: BLE001 - a report that cannot be written leaves the runs without it, not unexported
        return None


def export_study(store: Store, study: str, tracking_uri: str, scratch: Path) -> MlflowExport:
    """Write the study `study` to the MLflow tracking store at `tracking_uri` (see the module docstring)."""
    from sweep.core.errors import NotFound
    from sweep.views.read_model import read_study

    mlflow = load_mlflow()
    record = store.get_study_by_name(study)
    if record is None:
        raise NotFound(f"no study named {study}")
    model = read_study(store, record.id)
    client = mlflow.MlflowClient(tracking_uri=tracking_uri)
    name = f"sweep/{record.profile_name or 'profile'}"
    found = client.get_experiment_by_name(name)
    exp_id = found.experiment_id if found is not None else client.create_experiment(name)
    winner = model.decision.named
    parent = client.create_run(exp_id, run_name=record.name, tags={"sweep.study": record.name,
                                                                      "sweep.status": record.status})
    pid = parent.info.run_id
    client.log_param(pid, "profile", record.profile_name)
    client.log_param(pid, "sampler", record.sampler)
    client.log_param(pid, "winner", winner.config.label() if winner is not None else "none")
    if winner is not None:
        for knob, value in winner.config.knobs().items():
            client.log_param(pid, f"winner.{knob}", value)
        client.log_metric(pid, "winner_goodput_tps", winner.knee.goodput_tps)
        client.log_metric(pid, "winner_concurrency", winner.knee.concurrency)
    else:
        client.set_tag(pid, "sweep.why_no_winner", model.decision.why_none())
    report = _report_md(model, store, scratch)
    if report is not None:
        client.log_artifact(pid, str(report))
    children: dict[int, str] = {}
    for cfg in model.configs:
        if cfg.status == "aborted":
            continue  # an attempt measured again: its configuration's own row carries the ladder
        runs = sorted((r for r in model.runs if r.server_config_id == cfg.id and r.measured and r.stats is not None),
                      key=lambda r: (r.phase, r.concurrency))
        child = client.create_run(exp_id, run_name=cfg.label(), tags={
            "mlflow.parentRunId": pid, "sweep.study": record.name, "sweep.status": cfg.status})
        cid = children[cfg.id] = child.info.run_id
        for knob, value in cfg.config.columns().items():
            client.log_param(cid, knob, "unset" if value is None else value)
        phases = {r.phase for r in runs}
        client.log_param(cid, "phase", "final" if "final" in phases else min(phases, default="none"))
        for run in runs:
            for metric, stat in STEP_METRICS:
                v = stat(run.stats) if run.stats is not None else None
                if v is not None:
                    client.log_metric(cid, metric if run.phase == "final" else f"{run.phase}.{metric}",
                                      as_float(v), step=run.concurrency)
        client.set_terminated(cid, "FINISHED" if cfg.status in ("completed", "infeasible") else "FAILED")
    client.set_terminated(pid, "FINISHED")
    return MlflowExport(exp_id, pid, children, report)
