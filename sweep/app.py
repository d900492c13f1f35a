"""Wiring: profile -> workload -> launcher + driver -> ladder/search -> store -> report. No statistics here."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from launchers.base import Launcher, ServerHandle
from sweep.errors import ProfileError, SweepError, UsageError
from sweep.hardware import WorkerSeat, detect, pick_winner, rank_by_hardware
from sweep.knee import find_knee, knee_goodput_ci
from sweep.ladder import LadderOutcome, LadderRunner, step_points
from sweep.lexicon import for_model
from sweep.liveness import WorkerIdentity, sweep_version
from sweep.profile import Profile
from sweep.recovery import alone, clean_after_dead, kill_leftover_servers, on_requeued, worker_ended
from sweep.report import ReportFiles, config_missing, write_report
from sweep.search import Search, StudyResult
from sweep.step_inputs import refuse_short_dataset
from sweep.store import Store
from sweep.stream import RequestStream
from sweep.study_view import build_view
from sweep.types import ServerConfig

ROOT = Path(__file__).resolve().parent.parent
__all__ = ["KneeRun", "Orchestrator", "kill_leftover_servers", "study_context"]


def gpu_count() -> int:
    """Number of NVIDIA GPUs visible through NVML (0 without a driver)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - any NVML failure means no usable GPU here
        return 0


def resolve_launcher_kind(profile: Profile, override: str | None = None) -> str:
    """`auto` is the real SGLang server where a GPU and sglang (or a start command) exist, else the simulator."""
    kind = override or profile.server.launcher
    if kind != "auto":
        return kind
    has_sglang = importlib.util.find_spec("sglang") is not None or profile.server.command is not None
    return "sglang" if has_sglang and gpu_count() > 0 else "sim"


def resolve_driver(kind: str, override: str | None) -> str:
    if override and override != "auto":
        if override == "virtual" and kind != "sim":
            raise SweepError("--driver virtual needs the simulated server (launcher sim)")
        return override
    return "virtual" if kind == "sim" else "http"


def model_path(profile: Profile) -> str:
    p = Path(profile.server.model_path)
    return str(p if p.is_absolute() or not (ROOT / p).exists() else ROOT / p)


def make_launcher(profile: Profile, kind: str, driver: str, log_dir: Path, seat: WorkerSeat | None = None) -> Launcher:
    spec = profile.server.model_copy(update={"model_path": model_path(profile)})
    if kind == "sim" and driver == "virtual":
        from launchers.sim.virtual import VirtualLauncher

        return VirtualLauncher(gpu=spec.sim_gpu, model=spec.sim_model, extra_args=spec.extra_args,
                               model_path=spec.model_path)
    if kind == "attach":
        from launchers.attach import AttachLauncher

        if not spec.url:
            raise ProfileError("server.url is required with launcher attach")
        return AttachLauncher(spec.url)
    from launchers.sglang import SGLangLauncher

    if kind == "sim":
        sim = spec.model_copy(update={"extra_args": [*spec.extra_args, "--sim-gpu", spec.sim_gpu,
                                                     "--sim-model", spec.sim_model]})
        return SGLangLauncher(sim, log_dir, module="launchers.sim", simulated=True, drain_s=spec.shutdown_grace_s,
                              **_seat_args(seat))
    return SGLangLauncher(spec, log_dir, command_prefix=spec.command, drain_s=spec.shutdown_grace_s,
                          **_seat_args(seat))


def _seat_args(seat: WorkerSeat | None) -> dict[str, Any]:
    """A worker's GPU group and port range as SGLangLauncher arguments."""
    if seat is None:
        return {}
    return {"gpu_ids": None if seat.gpus is None else list(seat.gpus), "ports": seat.ports,
            "extra_env": dict(seat.extra_env)}


def make_driver(profile: Profile, driver: str, launcher: Launcher, client_procs: int = 1) -> Any:
    """The driver for this study; open-loop schedules are seeded from the workload seed."""
    if driver == "virtual":
        from sweep.drivers.virtual import VirtualDriver

        return VirtualDriver(seed=profile.workload.seed)
    from sweep.drivers.http import HttpDriver
    from sweep.probes import GpuProbe, MetricsProbe, ProcessProbe

    def probes(handle: ServerHandle, clock: Any) -> list[Any]:
        out: list[Any] = [MetricsProbe(handle.url or "", headers=handle.headers(), interval_s=1.0, clock=clock),
                          GpuProbe(interval_s=1.0, clock=clock)]
        if handle.pid:
            out.append(ProcessProbe(handle.pid, interval_s=2.0, clock=clock))
        return out

    # Think time travels with the arrival process the ladder passes to every window.
    return HttpDriver(api=profile.workload.api, model_name="default", probes=probes, alive=launcher.alive,
                      seed=profile.workload.seed, client_procs=client_procs,
                      stall_timeout_s=profile.server.stall_timeout_s)


@dataclass
class KneeRun:
    study_id: int
    study_name: str
    result: StudyResult
    report: ReportFiles
    simulated: bool
    driver: str
    winner: dict[str, Any] | None = None  # the study's winner from the store (covers trials of earlier processes)
    failures: list[ConfigFailure] = field(default_factory=list)  # configurations that failed or never started
    measured: bool = True  # whether any configuration got a completed measured step


@dataclass(frozen=True)
class ConfigFailure:
    """One configuration that yielded no ladder: its label, failure class (oom, timeout, bad_flag, crash, hung,
    errors, ...) and the stored reason."""

    label: str
    failure_class: str
    reason: str


def config_failures(store: Store, study_id: int) -> tuple[list[ConfigFailure], bool]:
    """(failed or infeasible-at-launch configurations of a study, whether any configuration measured a step)."""
    configs = [c for c in store.server_configs(study_id) if c["status"] != "aborted"]
    done = {r["server_config_id"] for r in store.study_runs(study_id) if r["status"] == "completed"}
    out = []
    for c in configs:
        reason = c.get("failure_reason")
        if c["status"] not in ("failed", "infeasible") or not reason:
            continue
        label = ServerConfig.from_mapping(c).label()
        cls = reason.split(":", 1)[0] if ":" in reason.split(" ", 1)[0] else "failed"
        out.append(ConfigFailure(label, cls, reason))
    return out, any(c["id"] in done for c in configs)


class Orchestrator:
    """Runs a profile's study end to end; every step lands in the store before the next begins."""

    def __init__(self, profile: Profile, db_url: str, out_dir: Path, launcher_kind: str | None = None,
                 driver: str | None = None, console: Any = None, client_procs: int = 1,
                 seat: WorkerSeat | None = None):
        self.profile = profile
        self.seat = seat or WorkerSeat()
        self.client_procs = client_procs
        self.db_url = db_url
        self.kind = resolve_launcher_kind(profile, launcher_kind)
        self.driver_name = resolve_driver(self.kind, driver)
        if self.kind == "attach" and not profile.server.url:
            raise ProfileError("server.url is required with launcher attach")
        if profile.crosscheck.enabled and self.driver_name == "virtual":
            if driver == "virtual":
                raise UsageError("a cross-check compares clients over real sockets: use --driver http (or auto)")
            self.driver_name = "http"
        if self.driver_name == "virtual":
            from launchers.sim.virtual import refuse_faults

            refuse_faults(profile.server.extra_args)  # before the database is touched
        self.simulated = self.kind == "sim"
        self.out_dir = out_dir
        self.console = console

    @cached_property
    def store(self) -> Store:
        """The results database, opened (and created) on first use: after every input check has passed."""
        return Store(self.db_url)

    def say(self, msg: str) -> None:
        if self.console is not None:
            self.console.print(msg)

    def open_study(self, study_name: str | None, resume: bool) -> tuple[int, str]:
        """The study's id and name: created, or (resume) found and cleaned of what dead workers left."""
        if study_name is None:
            stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
            study_name = f"{self.profile.name}-{stamp}" + ("-sim" if self.simulated else "")
        existing = self.store.get_study_by_name(study_name)
        if existing is not None:
            if not resume:
                raise SweepError(f"study {study_name} exists; pass --resume to continue it")
            if existing["fingerprint"] != self.profile.fingerprint():
                raise SweepError(f"study {study_name} was run with another workload fingerprint "
                                 f"({existing['fingerprint']} vs {self.profile.fingerprint()})")
            # Only what dead workers left: another live worker of this study keeps its server and its rows.
            clean_after_dead(self.store, existing["id"], self.say)
            self.store.reopen_study(existing["id"])
            return existing["id"], study_name
        study_id = self.store.create_study(
            study_name, self.profile.name, self.profile.model_dump_json(), self.profile.fingerprint(),
            self.profile.search.sampler, self.simulated, self.driver_name, study_name)
        return study_id, study_name

    def join(self, study_name: str, on_step: Any = None, on_step_start: Any = None, on_trial: Any = None) -> KneeRun:
        """Join an existing study as one more worker and measure until its work is done."""
        existing = self.store.get_study_by_name(study_name)
        if existing is None:
            raise SweepError(f"no study named {study_name} in {self.store._shown}: create it with "
                             "`sweep study create` or `sweep sweep`")
        self.open_study(study_name, resume=True)
        return self._work(existing["id"], study_name, on_step, on_step_start, on_trial)

    def knee(self, study_name: str | None = None, resume: bool = False, on_step: Any = None,
             on_step_start: Any = None, on_trial: Any = None) -> KneeRun:
        # Input first (the dataset, --out): a bad one is one line and nothing written, no study left running.
        # Requests are made on demand and never repeat on one server (sweep.stream); replay only when asked.
        # Made before the study row, so a dataset that cannot serve one ladder writes nothing.
        specs = RequestStream(self.profile.workload, base_dir=ROOT, lexicon=for_model(model_path(self.profile)))
        refuse_short_dataset(self.profile, specs)
        if self.profile.crosscheck.enabled:  # a reference that cannot run is one clear line before anything is stored
            from sweep.crosscheck_step import choose_reference

            choose_reference(self.profile, model_path(self.profile), for_model(model_path(self.profile)))
        check_writable_dir(self.out_dir)
        if self.simulated:
            self.say("[bold yellow]SIMULATED[/]: no GPU with SGLang here; using sweep's simulated SGLang server "
                     f"({self.profile.server.sim_model} on {self.profile.server.sim_gpu}), driver {self.driver_name}. "
                     "Numbers are labelled simulated everywhere.")
        study_id, study_name = self.open_study(study_name, resume)
        try:
            return self._work(study_id, study_name, on_step, on_step_start, on_trial, specs)
        except BaseException as exc:
            # Stopped by a signal or an orchestrator error: the study is resumable, and says it stopped.
            with contextlib.suppress(Exception):
                self.store.finish_study(study_id, "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed")
            raise

    def _work(self, study_id: int, study_name: str, on_step: Any = None, on_step_start: Any = None,
              on_trial: Any = None, specs: RequestStream | None = None) -> KneeRun:
        """Measure trials of the study as one of its workers until its work is done, then write the report."""
        if specs is None:
            specs = RequestStream(self.profile.workload, base_dir=ROOT, lexicon=for_model(model_path(self.profile)))
            refuse_short_dataset(self.profile, specs)
        seat = self.seat
        identity = WorkerIdentity.this_process()
        worker_id = self.store.register_worker(
            study_id, seat.label or f"{identity.host}:{identity.pid}", identity.host, identity.pid, identity.started,
            seat.gpus_text(), sweep_version(), self.profile.fingerprint())
        identity = replace(identity, worker_id=worker_id)
        log_dir = self.out_dir / study_name / "logs" / (seat.label or "")
        launcher = make_launcher(self.profile, self.kind, self.driver_name, log_dir, seat)
        env = normalise_env(launcher.environment(), self.profile, self.simulated)
        self.store.record_environment(study_id, env)
        driver = make_driver(self.profile, self.driver_name, launcher, self.client_procs)

        unmodelled: list[str] = []

        def on_launch(handle: ServerHandle) -> None:
            # A server that says it is simulated (an attached or wrapped sim) is labelled so, whatever
            # launcher started it: simulated numbers must never pass for a measurement of SGLang.
            if handle.server_info.get("simulated") and not self.simulated:
                handle.simulated = True
                self.simulated = True
                self.store.mark_study_simulated(study_id)
                env["simulated"] = True
                self.store.record_environment(study_id, env)
                self.say("[bold yellow]SIMULATED[/]: the server reports it is sweep's simulator; labelled so.")
            flags = [f for f in handle.server_info.get("unmodelled_flags") or [] if f not in unmodelled]
            if flags:  # the simulator accepted these and ignored them: the terminal, the DB and the report say so
                unmodelled.extend(flags)
                env["sim_unmodelled_flags"] = list(unmodelled)
                self.store.record_environment(study_id, env)
                for f in flags:
                    self.say(f"[bold yellow]SIMULATOR does not model[/] {f}")
            # The server's own /server_info is the surest version (a wrapper script hides the package).
            if handle.version and handle.version != env.get("sglang_version"):
                env["sglang_version"] = handle.version
                self.store.record_environment(study_id, env)

        runner = LadderRunner(self.profile, launcher, driver, self.store, study_id, specs, self.driver_name,
                              on_step=on_step, on_launch=on_launch)
        runner.on_step_start = on_step_start
        if self.profile.crosscheck.enabled:
            from sweep.crosscheck_step import CrossChecker

            runner.crosscheck = CrossChecker(self.profile, self.store, study_id, specs, model_path(self.profile),
                                             for_model(model_path(self.profile)), say=self.say)
        runner.placement = detect(self.kind if self.driver_name != "virtual" else "virtual", self.profile,
                                  seat.gpus, worker_id)
        search = Search(self.profile, runner, self.db_url, study_name, on_trial=on_trial, worker=identity,
                        on_requeued=on_requeued(self.store, study_id, self.say),
                        ended=lambda wid: worker_ended(self.store, study_id, wid),
                        alone=lambda: alone(self.store, study_id, worker_id))
        requeued = search.requeue_interrupted()
        if requeued:
            self.say(f"resume: {requeued} interrupted trial(s) queued again")

        def soak() -> None:
            from sweep.soak import run_soak

            ctx = study_context(self.store, study_id)
            if ctx["winner"] is None or soak_done(self.store, study_id):
                return
            self.say(f"soak: {self.profile.soak.duration_s:.0f} s of Poisson arrivals at the winner's knee rate")
            verdict = run_soak(self.profile, runner, ctx["winner"], ctx)
            self.say(f"soak verdict: {verdict.summary()}")

        status = "failed"
        try:
            result = search.run(reuse=lambda cfg, phase: self._reuse(study_id, cfg, phase),
                                soak=soak if self.profile.soak.enabled else None)
            status = "done"
        finally:
            self.store.set_worker_status(worker_id, status)
        if result.stopped_reason:
            self.say(f"search stopped early: {result.stopped_reason}")
        winner = study_context(self.store, study_id)["winner"]
        report = self.report(study_id)
        self.store.finish_study(study_id, "completed", winner_config_id=winner["id"] if winner else None,
                                report_path=str(report.markdown))
        failures, measured = config_failures(self.store, study_id)
        return KneeRun(study_id, study_name, result, report, self.simulated, self.driver_name,
                       study_context(self.store, study_id)["winner"], failures, measured)

    def _reuse(self, study_id: int, config: ServerConfig, phase: str = "final") -> LadderOutcome | None:
        """A configuration whose ladder (of this phase) completed before a kill is not measured twice."""
        for row in reversed(self.store.server_configs(study_id)):
            if row["config_key"] != config.key() or row["status"] not in ("completed", "infeasible"):
                continue
            steps = [dict(r) for r in self.store.completed_runs(study_id, row["id"])]
            if steps and any(r.get("phase", "final") != phase for r in steps):
                continue  # the other fidelity: a screen never stands in for a final, nor the reverse
            knee = find_knee(step_points(steps), self.profile.search.flatten_threshold)
            return LadderOutcome(config, row["id"], row["status"], steps, knee, row.get("stop_reason") or "")
        return None

    def report(self, study_id: int) -> ReportFiles:
        study = self.store.get_study(study_id)
        if study is None:
            raise SweepError(f"no study {study_id}")
        return write_report(study_context(self.store, study_id), self.out_dir / study["name"])


def check_writable_dir(path: Path) -> None:
    """--out exists or can be made, and takes a file; UsageError (one line, exit 2) otherwise."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise UsageError(f"--out {path}: cannot write there ({exc.strerror or exc})") from None


def soak_done(store: Store, study_id: int) -> bool:
    """Whether a completed soak run exists for this study (a resume does not soak twice)."""
    return any(r.get("phase") == "soak" and r["status"] == "completed" for r in store.study_runs(study_id))


def normalise_env(raw: dict[str, Any], profile: Profile, simulated: bool) -> dict[str, Any]:
    """Launcher facts under the environments table's column names (anything else lands in extra_json)."""
    env = dict(raw)
    gpus = env.pop("gpus", None) or []
    if gpus and not env.get("gpu_name"):
        env["gpu_name"] = gpus[0].get("name")
        env["gpu_memory_mib"] = gpus[0].get("memory_total_mib")
        env["gpu_count"] = len(gpus)
    renames = {"sglang": "sglang_version", "torch": "torch_version", "cuda": "cuda_version",
               "gpu_driver": "driver_version", "python": "python_version"}
    for old, new in renames.items():
        if old in env and not env.get(new):
            env[new] = env.pop(old)
    if not env.get("torch_version") and not simulated:
        try:
            from importlib.metadata import version

            env["torch_version"] = version("torch")
            import torch  # the orchestrator's python is the server's on a GPU host

            env.setdefault("cuda_version", torch.version.cuda)
        except Exception:  # noqa: BLE001 - torch is optional for the orchestrator
            pass
    env["model_path"] = profile.server.model_path
    env["simulated"] = simulated
    if simulated and not env.get("gpu_name"):
        env["gpu_name"] = f"{profile.server.sim_gpu} (simulated)"
        env["gpu_count"] = 1
        env.setdefault("sglang_version", "0.5.17-sim")
    env.setdefault("parallel", _parallel(profile.server.extra_args))
    return env


def _parallel(extra_args: list[str]) -> str:
    tp, dp = "1", "1"
    for i, a in enumerate(extra_args[:-1]):
        if a in ("--tp-size", "--tp", "--tensor-parallel-size"):
            tp = extra_args[i + 1]
        if a in ("--dp-size", "--dp", "--data-parallel-size"):
            dp = extra_args[i + 1]
    return f"TP {tp}, DP {dp}"


def study_context(store: Store, study_id: int, rank_mixed_hardware: bool = False) -> dict[str, Any]:
    """Everything a report needs about one study, from the store alone.

    A study measured on several GPU models has no single winner (each hardware group has its own) unless
    `rank_mixed_hardware` says to rank across them anyway.
    """
    study = store.get_study(study_id)
    if study is None:
        raise SweepError(f"no study {study_id}")
    configs = store.server_configs(study_id)
    runs = store.study_runs(study_id)
    env = store.environment(study_id) or {}
    profile = json.loads(study["profile_json"])
    labels = {c["id"]: ServerConfig.from_mapping(c).label() for c in configs}
    knees: dict[int, dict[str, Any]] = {}
    phases: dict[int, str] = {}
    for c in configs:
        if c["status"] == "aborted":
            continue  # an interrupted attempt: its steps stay stored but never count (the config was redone)
        steps = [r for r in runs if r["server_config_id"] == c["id"] and r["status"] == "completed"
                 and r.get("phase") != "soak"]
        if not steps:
            continue
        phases[c["id"]] = steps[0].get("phase") or "final"
        points = step_points(steps)
        k = find_knee(points, profile["search"]["flatten_threshold"])
        if k.point is not None:
            lo, hi = knee_goodput_ci(points, profile["search"]["flatten_threshold"])
            knees[c["id"]] = {"concurrency": k.point.concurrency, "goodput_tps": k.point.goodput_tps,
                              "goodput_rps": k.point.goodput_rps, "ci_low": lo, "ci_high": hi,
                              "phase": phases[c["id"]], "reason": k.reason,
                              "throughput_rps": steps[k.index or 0].get("throughput_rps")}
    # A candidate ran its ladder to the end (a failed one never wins) and meets the report contract itself.
    status = {c["id"]: c["status"] for c in configs}

    def eligible(i: int) -> bool:
        return status[i] == "completed" and not config_missing([r for r in runs if r["server_config_id"] == i])

    winner, pool = pick_winner(configs, knees, eligible)
    hardware = rank_by_hardware(configs, knees, rank_mixed_hardware, eligible)
    if hardware.reason is not None:
        winner = None  # knees on different GPU models are not comparable: see hardware.winners
    return {"hardware": hardware, "study": study, "configs": configs, "runs": runs, "env": env, "profile": profile,
            "labels": labels, "knees": knees, "winner": winner, "generated": time.time(), "argv": sys.argv,
            "trials": optuna_history(study, store.url), "soak_verdicts": soak_verdicts(store, runs, profile),
            "reference_runs": store.reference_runs(study_id), "histograms": store.window_histograms(study_id),
            "view": build_view(store.requests_for_run, configs, runs, knees, winner, pool,
                               coupled=profile["search"].get("mode") == "coupled"),
            "request_tokens": store.study_request_tokens(study_id)}


def soak_verdicts(store: Store, runs: list[dict[str, Any]], profile: dict[str, Any]) -> dict[int, Any]:
    """Each completed soak run's verdict, recomputed from its stored samples (the verdict is pure)."""
    from sweep.profile import Soak
    from sweep.soak import judge

    soak = Soak(**profile.get("soak", {}))
    return {r["id"]: judge(store.samples_for_run(r["id"]), soak, r.get("sla_failures")) for r in runs
            if r.get("phase") == "soak" and r["status"] == "completed"}


def optuna_history(study: dict[str, Any], url: str) -> list[dict[str, Any]]:
    """(number, state, value, feasible) of the study's Optuna trials, for the history plot; [] without one."""
    import optuna

    name = study.get("optuna_study_name")
    if not name:
        return []
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        st = optuna.load_study(study_name=name, storage=url)
    except Exception:  # noqa: BLE001 - no Optuna study under that name (e.g. a report of a foreign DB)
        return []
    return [{"number": t.number, "state": t.state.name, "value": t.value,
             "feasible": bool(t.user_attrs.get("feasible")), "phase": t.user_attrs.get("phase", "final")}
            for t in st.get_trials(deepcopy=False)]
