"""`sweep crosscheck`: right after sweep's own window at a step, the reference client measures the same server.

The ladder calls before_window (the prefix cache is flushed, so neither side inherits the other's cache) and
after_window (the reference runs the same requests at the same concurrency with the same window, its row is
stored with its own driver name and reference_for_run_id = sweep's run, and the pure comparison is returned).
Which reference (profile crosscheck.reference):
- bench_serving: SGLang's `python -m sglang.bench_serving` (crosscheck.command, else the importable package);
- h11: sweep.drivers.reference, a client on a different HTTP stack than sweep's own (a sessions workload: it
  replays the same sessions, sweep.drivers.reference_sessions, and its row gets the session columns too);
- auto: bench_serving where one can run and can express the workload (bench_serving.image_dataset_args), else h11.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from sweep.analysis.crosscheck import CrossCheck, Tolerance, compare_runs
from sweep.analysis.measure import compute_stats
from sweep.analysis.run_stats import RunStats
from sweep.analysis.sessions import session_columns
from sweep.core.errors import Fenced, SweepError, UsageError
from sweep.drivers import bench_serving
from sweep.drivers.flush import flush_over_http
from sweep.drivers.reference import H11Reference
from sweep.launchers.base import ServerHandle
from sweep.profile import ArrivalProcess, Profile, Window
from sweep.store import Store
from sweep.workload.lexicon import Lexicon
from sweep.workload.stream import Requests

FLUSH_DEADLINE_S = 10.0


def tolerance(profile: Profile) -> Tolerance:
    """The profile's cross-check tolerance."""
    return Tolerance.of(profile.crosscheck.model_dump())


def choose_reference(profile: Profile, tokenizer: str,
                     lexicon: Lexicon) -> H11Reference | bench_serving.BenchServingReference:
    """The reference client the profile asks for (see the module docstring); one clear error when it cannot run."""
    cc = profile.crosscheck
    command = cc.command or bench_serving.default_command()
    kind = cc.reference
    if kind == "auto":
        kind = "bench_serving" if command is not None and _expressible(profile) else "h11"
    if kind == "h11":
        return H11Reference(api=profile.workload.api, url=cc.reference_url)
    if profile.workload.sessions is not None:
        raise UsageError("crosscheck.reference=bench_serving cannot replay multi-turn sessions (workload.sessions): "
                         "use reference h11 or auto")
    if command is None:
        raise UsageError("crosscheck.reference=bench_serving: sglang is not importable here and crosscheck.command "
                         "is not set")
    return bench_serving.BenchServingReference(command, profile.workload, tokenizer, lexicon,
                                               url=cc.reference_url, seed=profile.workload.seed)


def _expressible(profile: Profile) -> bool:
    """Whether bench_serving can run this workload (text as the same requests, images as the same shape; never
    sessions: it sends single requests)."""
    if profile.workload.sessions is not None:
        return False
    if profile.workload.mix.text == 1.0:
        return True
    try:
        bench_serving.image_dataset_args(profile.workload)
    except SweepError:
        return False
    return True


def flush_cache(url: str, headers: dict[str, str], deadline_s: float = FLUSH_DEADLINE_S) -> bool:
    """POST /flush_cache until the server accepts it (sweep.drivers.flush); False if it never does or cannot."""
    return flush_over_http(url, headers, deadline_s) is None


class CrossChecker:
    """The ladder's cross-check hooks for one study."""

    def __init__(self, profile: Profile, store: Store, study_id: int, specs: Requests, tokenizer: str,
                 lexicon: Lexicon, say: Callable[[str], None] | None = None):
        self.profile = profile
        self.store = store
        self.study_id = study_id
        self.specs = specs
        self.reference = choose_reference(profile, tokenizer, lexicon)
        self.tolerance = tolerance(profile)
        self.say = say or (lambda _msg: None)

    @property
    def name(self) -> str:
        return self.reference.name

    def before_window(self, handle: ServerHandle) -> None:
        """Start sweep's window from an empty prefix cache, as the reference's will."""
        if handle.url:
            flush_cache(handle.url, handle.headers())

    def after_window(self, handle: ServerHandle, config_id: int, concurrency: int, run_id: int,
                     stats: RunStats, phase: str, window: Window, arrival: ArrivalProcess | None = None,
                     specs: Requests | None = None) -> CrossCheck | None:
        """Measure the reference at this step, store its row linked to run_id, compare; None if it failed.

        specs: the requests sweep's window was given (default: the study's); the reference sends the same ones."""
        specs = self.specs if specs is None else specs
        ref_id = self.store.create_run(self.study_id, config_id, concurrency, self.profile.fingerprint(),
                                       handle.simulated, self.reference.name, phase=phase, reference_for=run_id)
        if handle.url:
            flush_cache(self.profile.crosscheck.reference_url or handle.url, handle.headers())
        try:
            if isinstance(self.reference, H11Reference):
                result = self.reference.run_window(handle, specs, concurrency, window, arrival=arrival)
                measured = replace(compute_stats(result, self.profile.sla, min_requests=self.profile.window.min_requests),
                                   **session_columns(result.records))
                self.store.finish_run(ref_id, measured, result.records, result.samples, result.window_start)
                ref_stats: Mapping[str, object] = measured.columns()
            else:  # bench_serving's summary: a partial row of runs columns
                summary = self.reference.run_step(handle.url or "", handle.api_key, specs, concurrency,
                                                  stats.n_started, min(window.warmup_requests, concurrency),
                                                  window.measure_seconds + window.drain_seconds)
                # its own warm-up: that many requests completed before it measured (sweep.analysis.measure), time unknown
                ref_stats = dict(summary, warmup_requests=max(1, min(window.warmup_requests, concurrency)), warmup_s=None)
                self.store.finish_run(ref_id, ref_stats, [], [], 0.0, reason=self.reference.note or None)
        except Fenced:  # this worker's lease on the attempt lapsed: nothing more is written for it
            raise
        except (SweepError, OSError, RuntimeError, ValueError) as exc:  # a failed reference never stops the study
            self.store.mark_run(ref_id, "failed", str(exc) or type(exc).__name__)
            self.say(f"[yellow]cross-check at c={concurrency}: {self.reference.name} failed: {exc}[/]")
            return None
        check = compare_runs(stats.columns(), ref_stats, self.tolerance)
        if check.agrees is None:
            verdict = "not judged (no figures on one side)"
        elif check.agrees:
            verdict = f"agrees within {self.tolerance.describe()}"
        else:
            verdict = "DIFFERS: " + ", ".join(f.label for f in check.flagged)
        self.say(f"  cross-check c={concurrency}: {self.reference.name} {verdict} (run {ref_id} vs {run_id})")
        return check
