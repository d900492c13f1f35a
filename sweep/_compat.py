"""Old module paths, kept for one release (0.1.x): `sweep.knee` is `sweep.analysis.knee`, `launchers.sglang` is
`sweep.launchers.sglang`, and so on. Importing an old path returns the new module itself (one object, so
patching either name patches both) and warns once. Remove in 0.2.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import warnings
from types import ModuleType
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from importlib.abc import Loader

OLD_PATHS: dict[str, str] = {
    "sweep.types": "sweep.core.types", "sweep.errors": "sweep.core.errors", "sweep.interrupt": "sweep.core.interrupt",
    "sweep.profile_inputs": "sweep.profile.inputs", "sweep.profile_doc": "sweep.profile.doc",
    "sweep.measure": "sweep.analysis.measure", "sweep.measure_client": "sweep.analysis.measure_client",
    "sweep.run_stats": "sweep.analysis.run_stats", "sweep.server_metrics": "sweep.analysis.server_metrics",
    "sweep.crosscheck": "sweep.analysis.crosscheck", "sweep.knee": "sweep.analysis.knee",
    "sweep.hardware": "sweep.analysis.winner",
    "sweep.workload_media": "sweep.workload.media", "sweep.datasets": "sweep.workload.datasets",
    "sweep.lexicon": "sweep.workload.lexicon", "sweep.stream": "sweep.workload.stream",
    "sweep.cache_model": "sweep.workload.cache_model", "sweep.probes": "sweep.drivers.probes",
    "sweep.study_context": "sweep.views.context", "sweep.study_view": "sweep.views.study",
    "sweep.live_state": "sweep.views.live", "sweep.worker_view": "sweep.views.workers",
    "sweep.report_crosscheck": "sweep.report.crosscheck", "sweep.report_html": "sweep.report.html",
    "sweep.report_inputs": "sweep.report.inputs", "sweep.report_plots": "sweep.report.plots",
    "sweep.report_setup": "sweep.report.setup", "sweep.report_tables": "sweep.report.tables",
    "sweep.report_winner": "sweep.report.winner",
    "sweep.orchestrator": "sweep.study.orchestrator", "sweep.wiring": "sweep.study.wiring",
    "sweep.ladder": "sweep.study.ladder", "sweep.step_inputs": "sweep.study.step_inputs",
    "sweep.search": "sweep.study.search", "sweep.space": "sweep.study.sampler", "sweep.soak": "sweep.study.soak",
    "sweep.crosscheck_step": "sweep.study.crosscheck_step", "sweep.launch": "sweep.study.launch",
    "sweep.environment": "sweep.study.environment", "sweep.resume": "sweep.study.resume",
    "sweep.recovery": "sweep.study.recovery", "sweep.liveness": "sweep.study.liveness",
    "sweep.doctor": "sweep.study.doctor", "sweep.live": "sweep.ui.live", "sweep.progress": "sweep.ui.progress",
    "sweep.shared_study": "sweep.fleet.shared_study", "sweep.peer_feed": "sweep.fleet.peer_feed",
    "sweep.cli_boundary": "sweep.cli.boundary", "sweep.cli_workers": "sweep.cli.workers",
    **{f"launchers.{m}": f"sweep.launchers.{m}" for m in (
        "base", "sglang", "attach", "virtual", "procs", "flags", "keyshim", "launch_record", "server_log")},
}


class _Alias:  # an importlib Loader (the protocol is duck-typed: importlib.abc costs ~8 ms of start-up)
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(f"{spec.name} moved to {self.target}; the old path goes in sweep 0.2",
                      DeprecationWarning, stacklevel=3)
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        """The new module ran when it was imported; nothing more to do."""


class OldPathFinder:  # an importlib MetaPathFinder, duck-typed like _Alias
    """Finds an old module path and hands back the module at its new one."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        new = OLD_PATHS.get(fullname)
        return None if new is None else importlib.machinery.ModuleSpec(fullname, cast("Loader", _Alias(new)))


def install() -> None:
    """Put the finder on sys.meta_path once."""
    if not any(isinstance(f, OldPathFinder) for f in sys.meta_path):
        sys.meta_path.append(OldPathFinder())
