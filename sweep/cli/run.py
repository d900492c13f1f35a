"""The verbs that measure: `sweep knee` (the whole study), `ladder`, `crosscheck`, `doctor` and `profile-schema`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal

import typer
from rich.console import Console
from rich.markup import escape

from sweep.cli.app import DEFAULT_DB, app, console, db_url, load_profile_arg
from sweep.core import interrupt
from sweep.core.errors import CrossCheckDiffers, LaunchError, UsageError, WorkloadError
from sweep.core.types import KNOB_NAMES, DriverKind, FlagScalar, LauncherKind, ReferenceKind, ServerConfig

HttpDriverKind = Literal["auto", "http"]  # a cross-check compares clients over real sockets: never virtual


@app.command()
def knee(profile: str = typer.Option(..., "--profile", "-p", help="profile name or YAML path"),
         db: str = typer.Option(DEFAULT_DB, help="results database (path or SQLAlchemy URL)"),
         driver: DriverKind = typer.Option("auto", help="what sends the requests (auto: virtual with the simulator, "
                                           "else http)"),
         launcher: LauncherKind | None = typer.Option(None, help="override server.launcher"),
         study: str | None = typer.Option(None, help="study name (default: profile + timestamp)"),
         resume: bool = typer.Option(False, help="continue an interrupted study of this name"),
         out: Path = typer.Option(Path("reports"), help="where reports and server logs go"),
         set_: list[str] = typer.Option([], "--set", help="override a profile field: key.path=value"),
         progress: bool = typer.Option(True, help="rich progress bars with ETA on stderr"),
         soak: bool | None = typer.Option(None, help="force the winner's soak on/off (default: the profile's)"),
         client_procs: int = typer.Option(1, "--client-procs", min=1,
                                          help="HTTP driver: shard the load over N client processes"),
         crosscheck: bool = typer.Option(False, "--crosscheck",
                                         help="after every window, measure the same step with a reference client"),
         live: bool = typer.Option(False, "--live", help="serve the live page on 127.0.0.1 while the study runs"),
         live_port: int = typer.Option(8765, "--live-port", min=0, max=65535,
                                       help="the live page's port (0: any free port)"),
         gpus: str | None = typer.Option(None, help="one worker per GPU group of this host on one study, e.g. 0,1,2,3"),
         gpus_per_server: int | None = typer.Option(None, "--gpus-per-server", min=1,
                                                    help="GPUs per server with --gpus (default: tp x dp)"),
         as_json: bool = typer.Option(False, "--json", help="print the final answer as JSON on stdout (answer.json; "
                                      "docs/json-schema/answer.json); progress stays on stderr"),
         skip_infeasible: bool | None = typer.Option(
             None, "--skip-infeasible/--no-skip-infeasible",
             help="skip configurations predicted not to start (default: the profile's server.skip_infeasible)"),
         ignore_resources: bool = typer.Option(False, "--ignore-resources", help=(
             "start even when the study's estimated client memory or database growth (`sweep plan`) exceeds "
             "what this machine has")),
         ) -> object:
    """Search the profile's space, climb the ladder per configuration, name the knee, write the report.

    Returns the study's KneeRun (sweep.study.orchestrator; typed object so typer need not import it)."""
    extra = [] if soak is None else [f"soak.enabled={json.dumps(soak)}"]
    extra += ["crosscheck.enabled=true"] if crosscheck else []
    extra += [] if skip_infeasible is None else [f"server.skip_infeasible={json.dumps(skip_infeasible)}"]
    from sweep.profile import check_study_name, is_loopback
    from sweep.ui.progress import StampedConsole, StudyProgress

    prof = load_profile_arg(profile, list(set_) + extra)
    if study is not None:
        check_study_name(study)
    from sweep.study.orchestrator import (
        Orchestrator,  # heavy (optuna, matplotlib): after the cheap input checks
    )
    if not is_loopback(prof.server.host):
        console.print(f"[bold yellow]warning[/]: the server listens on {prof.server.host} "
                      "(server.allow_non_loopback_host): other hosts can reach it")
    orch = Orchestrator(prof, db_url(db), out, launcher_kind=launcher, driver=driver,
                        console=StampedConsole(console), client_procs=client_procs,
                        check_resources=not ignore_resources)
    page = None
    if live:
        from sweep.ui.live import LiveServer

        _ = orch.store  # the page reads (never makes or migrates) the database: the study makes it first
        page = LiveServer(db_url(db), study, port=live_port)
        console.print(f"live page {page.start()}")
    try:
        with interrupt.stop_like_sigint():
            if gpus is not None:
                from sweep.cli.workers import knee_on_gpus

                run = knee_on_gpus(orch, gpus, gpus_per_server, study, resume, db_url(db), out, launcher, driver,
                                   client_procs)
            else:
                with StudyProgress(prof, progress, console) as bars:
                    orch.on_server = bars.server
                    run = orch.knee(study_name=study, resume=resume, on_step=bars.step_done,
                                    on_step_start=bars.step_start, on_trial=bars.trial_done, on_prior=bars.replan)
    finally:
        if page is not None:
            page.stop()
    win = run.winner
    tag = " [SIMULATED]" if run.simulated else ""
    for f in run.failures:
        console.print(f"[red]{escape(f.failure_class)}[/] {escape(f.label)}: {escape(f.reason[:400])}", highlight=False)
    if not run.measured and run.failures and all(f.failure_class == "dataset_exhausted" for f in run.failures):
        raise WorkloadError(f"the dataset ran out before any configuration measured a step (above); study "
                            f"{run.study_name}, report {run.report.markdown}")
    if not run.measured and run.failures:
        raise LaunchError(f"every configuration failed ({len(run.failures)}), nothing was measured; "
                          f"study {run.study_name}, report {run.report.markdown}")
    if win is None:
        console.print(f"[bold red]{escape(run.no_winner or 'no configuration passed the SLA')}{tag}[/]")
    elif run.report.missing:
        pass  # the contract line below says why no knee is named
    else:
        from sweep.analysis.loads import load_words

        k = win.knee
        ci = "" if k.ci_low is None or k.ci_high is None else f", 95% CI {k.ci_low:,.0f}–{k.ci_high:,.0f}"
        knobs = " ".join(f"{a}={b}" for a, b in win.config.knobs().items()) or "the server's defaults"
        console.print(f"[bold green]knee{tag}[/]: {knobs} at "
                      f"{load_words(k.concurrency, k.offered_rps)}, goodput {k.goodput_tps:,.0f} output tok/s{ci} "
                      f"({k.reason})")
    if run.answer is not None and not run.report.missing and run.measured:
        from sweep.report.answer import answer_lines, plain_lines
        from sweep.report.winner import study_dialect

        # report.md holds the markdown; the terminal gets it as plain text
        console.print("\n".join(plain_lines(answer_lines(run.answer, study_dialect(prof.model_dump(mode="json"))))),
                      markup=False, highlight=False)
    if run.report.missing:
        console.print(f"[yellow]report contract not met, no conclusion drawn: missing {', '.join(run.report.missing)}[/]")
    console.print(f"study {run.study_name} (id {run.study_id}) in {db}; report {run.report.markdown}"
                  + (f" and {run.report.html}" if run.report.html else ""))
    if as_json and run.answer is not None:
        typer.echo(run.answer.to_json())
    return run


app.command("sweep", help="Overnight alias of knee: resumes the named study after an interruption.")(knee)


@app.command()
def ladder(profile: str = typer.Option(..., "--profile", "-p"),
           config: str = typer.Option("", help="knobs and other flags by name, e.g. "
                                       "max_running_requests=64,mem_fraction_static=0.8,kv_cache_dtype=fp8_e5m2"),
           db: str = typer.Option(DEFAULT_DB), driver: DriverKind = typer.Option("auto"),
           launcher: LauncherKind | None = typer.Option(None), out: Path = typer.Option(Path("reports")),
           set_: list[str] = typer.Option([], "--set"),
           client_procs: int = typer.Option(1, "--client-procs", min=1),
           crosscheck: bool = typer.Option(False, "--crosscheck",
                                           help="after every window, measure the same step with a reference client"),
           study: str | None = typer.Option(None, help="study name (default: profile + timestamp)"),
           skip_infeasible: bool | None = typer.Option(
               None, "--skip-infeasible/--no-skip-infeasible",
               help="skip the configuration if predicted not to start (default: the profile's)"),
           ignore_resources: bool = typer.Option(False, "--ignore-resources",
                                                 help="start even when the estimate exceeds this machine")) -> object:
    """Climb the ladder for one server configuration (no search, no screening, no soak)."""
    given: dict[str, str] = {}
    flags: dict[str, FlagScalar] = {}  # any other flag of the engine: checked with the profile's search.space
    for part in filter(None, config.split(",")):
        key, _, raw = part.partition("=")
        if not key.isidentifier():
            raise UsageError(f"--config: {part!r} is not name=value (a knob or flag by its name, e.g. kv_cache_dtype)")
        if key in KNOB_NAMES:
            given[key] = raw
        else:
            flags[key] = _scalar(raw)
    try:
        knobs = ServerConfig.from_mapping(given).knobs()
    except ValueError as exc:
        raise UsageError(f"--config: {exc}") from None
    space = {k: [v] for k, v in {**knobs, **flags}.items()}
    return knee(profile=profile, db=db, driver=driver, launcher=launcher, study=study, resume=False, out=out,
                set_=list(set_) + [f"search.space={json.dumps(space)}", "search.sampler=grid",
                                   "search.screening.enabled=false", "search.baseline=false"],
                progress=True, soak=False, client_procs=client_procs, crosscheck=crosscheck, live=False,
                live_port=0, gpus=None, gpus_per_server=None, skip_infeasible=skip_infeasible,
                ignore_resources=ignore_resources, as_json=False)


def _scalar(raw: str) -> FlagScalar:
    """A --config flag value: true / false, a number, else the text itself."""
    low = raw.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            pass
    return raw


@app.command("crosscheck")
def crosscheck_cmd(profile: str = typer.Option(..., "--profile", "-p"),
                   config: str = typer.Option("", help="knobs, e.g. max_running_requests=64,mem_fraction_static=0.8"),
                   db: str = typer.Option(DEFAULT_DB), driver: HttpDriverKind = typer.Option("auto"),
                   launcher: LauncherKind | None = typer.Option(None), out: Path = typer.Option(Path("reports")),
                   set_: list[str] = typer.Option([], "--set"),
                   reference: ReferenceKind | None = typer.Option(None, help="the reference client (default: the "
                                                                  "profile's crosscheck.reference)"),
                   study: str | None = typer.Option(None, help="study name (default: profile + timestamp)"),
                   client_procs: int = typer.Option(1, "--client-procs", min=1),
                   no_fail: bool = typer.Option(False, "--no-fail",
                                                help="exit 0 even when a judged figure differs")) -> None:
    """Climb one configuration's ladder; after each window an independent client measures the same step.

    Exits 6 (CrossCheckDiffers) when any judged figure of any step differs, unless --no-fail."""
    extra = [f"crosscheck.reference={reference}"] if reference else []
    run = ladder(profile=profile, config=config, db=db, driver=driver, launcher=launcher, out=out,
                 set_=list(set_) + extra, client_procs=client_procs, crosscheck=True, study=study, skip_infeasible=None,
                 ignore_resources=False)
    from sweep.analysis.crosscheck import Tolerance
    from sweep.store import Store
    from sweep.study.orchestrator import KneeRun
    from sweep.views.crosscheck import step_checks

    assert isinstance(run, KneeRun)

    tol = Tolerance.of(load_profile_arg(profile, list(set_) + extra).crosscheck.model_dump())
    store = Store(db_url(db))
    try:
        differs = [c.line() for c in step_checks(store, run.study_id, tol) if c.check.agrees is False]
    finally:
        store.close()
    if differs and not no_fail:
        raise CrossCheckDiffers(f"cross-check DIFFERS at {len(differs)} step(s): {'; '.join(differs)}")
    if differs:
        console.print(f"[yellow]cross-check DIFFERS (--no-fail): {escape('; '.join(differs))}[/]", highlight=False)


@app.command()
def plan(profile: str = typer.Option(..., "--profile", "-p", help="profile name or YAML path"),
         set_: list[str] = typer.Option([], "--set", help="override a profile field: key.path=value"),
         no_prior: bool = typer.Option(False, "--no-prior", help=(
             "do not run the simulated prior (search.prior sim): assume its survivors and knees (instant)"))) -> None:
    """What a study of the profile plans: its windows and hours, its client memory and database growth (upper
    bounds; `sweep knee` refuses a study that exceeds this machine unless --ignore-resources), and a warning for
    each step whose warm-up is shorter than one request (sweep.views.warmup).

    With search.prior sim the plan runs the study's simulated prior first (CPU, virtual clock, a temporary database
    deleted afterwards: the plan writes nothing) and plans with its survivors and predicted knees; --no-prior, or a
    space the prior cannot rank, keeps the assumption."""
    from sweep.study.plan_prior import plan_needs_prior, prior_blocked, run_plan_prior
    from sweep.views.footprint import study_footprint
    from sweep.views.plan import study_plan
    from sweep.views.warmup import warmup_warnings

    prof = load_profile_arg(profile, list(set_))
    figures = None
    if plan_needs_prior(prof) and not no_prior:
        why_not = prior_blocked(prof)
        if why_not is not None:
            typer.echo(f"{prof.name}: prior not run: {why_not}; the plan assumes its survivors and knees")
        else:
            typer.echo(f"{prof.name}: running the simulated prior (CPU, virtual clock: minutes, e.g. about 5 for "
                       "interactive; --no-prior assumes its outcome instead)", err=True)
            ran = run_plan_prior(prof, say=lambda line: typer.echo(f"{prof.name}: {line}", err=True))
            figures = ran.figures()
            if ran.survivors_line():
                typer.echo(f"{prof.name}: {ran.survivors_line()}")
    steps = study_plan(prof, figures)
    span = f"{steps.seconds / 3600:.1f} h" if steps.seconds >= 3600 else f"{steps.seconds / 60:.0f} min"
    typer.echo(f"{prof.name}: {steps.steps} windows, about {span} on the driver's clock; "
               f"{study_footprint(prof).line()}")
    typer.echo(f"{prof.name}: {steps.cost_line()}")
    for line in warmup_warnings(prof):
        typer.echo(line)


@app.command()
def init(name: str = typer.Argument("interactive", help="the new profile's name (its file's stem)"),
         from_: str | None = typer.Option(None, "--from", help=(
             "the shipped profile to start from (default: NAME where sweep ships one, else interactive)"))) -> None:
    """Write an editable profile to ./profiles/NAME.yaml, copied from one sweep ships; `--profile NAME` then finds
    it before the shipped one. Never overwrites a file."""
    from sweep.profile import check_study_name
    from sweep.profile.bundled import PROFILES, bundled_profiles

    check_study_name(name, "NAME")
    shipped = bundled_profiles()
    source = from_ or (name if name in shipped else "interactive")
    if source not in shipped:
        raise UsageError(f"--from {source!r}: sweep ships {', '.join(shipped)}")
    target = Path("profiles") / f"{name}.yaml"
    if target.exists():
        raise UsageError(f"{target} exists: not overwritten (edit it, or pick another NAME)")
    target.parent.mkdir(parents=True, exist_ok=True)
    text = (PROFILES / f"{source}.yaml").read_text()
    target.write_text(re.sub(r"(?m)^name:.*$", f"name: {name}", text, count=1))
    typer.echo(f"wrote {target} (from sweep's {source} profile): edit it, then `sweep knee --profile {name}`")


@app.command("profile-schema")
def profile_schema(out: Path = typer.Option(Path("docs/profile.md"), help="where the reference goes ('-': stdout)")
                   ) -> None:
    """Write the profile reference (every field, its default and meaning) from the pydantic models."""
    from sweep.profile.doc import reference

    text = reference()
    if str(out) == "-":
        typer.echo(text, nl=False)
        return
    out.write_text(text)
    console.print(f"wrote {out}")


@app.command()
def doctor(profile: str = typer.Option("interactive", "--profile", "-p"), db: str = typer.Option(DEFAULT_DB)) -> None:
    """Check GPUs, sglang and its flags, leftover server processes, ports and the database."""
    from sweep.study.doctor import render, run_doctor

    checks = run_doctor(load_profile_arg(profile, []), db_url(db))
    render(checks, Console())
    if any(c.ok is False for c in checks):
        raise typer.Exit(1)


