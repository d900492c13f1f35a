"""The report's winner section: the verdict, its caveats (bracketing, ties, client-bound) and the launch command."""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from sweep import engines
from sweep.analysis.ladder_steps import ladder_phase
from sweep.analysis.loads import load_text, load_words
from sweep.analysis.winner import Winner
from sweep.core.types import JSON, ServerConfig
from sweep.profile.bundled import model_folder
from sweep.report.setup import code
from sweep.report.tables import ci_text, fmt
from sweep.views.study import StudyContext, StudyView

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".ckpt", ".h5", ".msgpack")


def launch_argv(model_path: str, knobs: Mapping[str, JSON], extra_args: list[str],
                dialect: engines.Dialect | None = None) -> list[str]:
    """The winning configuration's launch argv (`python -m sglang.launch_server ...` for SGLang), as the
    launcher builds it (its host and port left to the reader)."""
    dialect = dialect or engines.default()
    return [*dialect.launch_command(), *dialect.server_argv(model_path, ServerConfig.of(knobs), extra_args)]


def launch_command(model_path: str, knobs: Mapping[str, JSON], extra_args: list[str],
                   dialect: engines.Dialect | None = None) -> str:
    """The ready-to-paste, shell-quoted command: one flag and its value per line."""
    argv = launch_argv(model_path, knobs, extra_args, dialect)
    groups, i = [argv[:3]], 3
    while i < len(argv):  # a flag's value stays on the flag's line
        take = 2 if argv[i].startswith("--") and i + 1 < len(argv) and not argv[i + 1].startswith("--") else 1
        groups.append(argv[i:i + take])
        i += take
    return " \\\n  ".join(shlex.join(g) for g in groups)


def study_dialect(profile_raw: Mapping[str, JSON]) -> engines.Dialect:
    """The engine the study's profile names (the default engine where that name is not registered here)."""
    server = profile_raw.get("server")
    name = str(server.get("engine", engines.DEFAULT_ENGINE) if isinstance(server, dict) else engines.DEFAULT_ENGINE)
    return engines.get(name) if name in engines.names() else engines.default()


def shape_only(model_path: str) -> bool:
    """A model folder here with a config but no weight files: it only serves with `--load-format dummy`."""
    folder = model_folder(model_path)
    if folder is None or not (folder / "config.json").is_file():
        return False  # a hub id, or a folder not on this machine: nothing to tell
    return not any(f.name.endswith(WEIGHT_SUFFIXES) for f in folder.rglob("*") if f.is_file())


def _dummy_weights(args: list[str]) -> bool:
    return any(a == "--load-format" and b == "dummy" for a, b in zip(args, args[1:], strict=False)) or (
        "--load-format=dummy" in args)


def launch_warnings(model_path: str, extra_args: list[str]) -> list[str]:
    """Why the printed command would not serve a real model as it stands."""
    out = []
    if _dummy_weights(extra_args):
        out.append("> **Warning**: this command carries `--load-format dummy`: the server runs random weights "
                   "(right for measuring, useless for answers). Drop it to serve the real model.")
    if shape_only(model_path):
        out.append(f"> **Warning**: {code(model_path)} is a shape-only folder (config and tokenizer, no weight "
                   "files): point `--model-path` at the real checkpoint before serving with this command.")
    return out


def winner_lines(ctx: StudyContext, winner: Winner, view: StudyView, launch: bool = True) -> list[str]:
    """The winner, its caveats and its launch command (the caller has checked the report contract); `launch` False:
    the answer block above already prints the command and its warnings, so this section points there."""
    study, env = ctx.study, ctx.env
    knee, labels = winner.knee, ctx.labels
    lines = ["## Winner", "",
             f"**{labels.get(winner.id)}**: knee at {load_words(knee.concurrency, knee.offered_rps)}, goodput "
             f"{fmt(knee.goodput_tps)} output tok/s inside the SLA (95% CI {ci_text(knee)} output tok/s, knee re-chosen in "
             "every bootstrap resample)" + (" (simulated)." if study.simulated else "."), ""]
    if winner.screen_only:
        lines += ["> Screening only: no final (long-window) ladder ran, so this winner rests on short windows.", ""]
    if winner.id in view.knee_at_top:
        at, rate = load_text(knee.concurrency, knee.offered_rps), knee.offered_rps is not None
        lines += [f"> **Not bracketed**: the knee is the highest step measured ({at}); a higher "
                  f"{'rate' if rate else 'concurrency'} may do better. Extend the ladder past "
                  f"{at.removeprefix('c=')} before trusting this knee.", ""]
    if view.ties:
        tied = ", ".join(f"{labels.get(cid)} ({fmt(ctx.knees[cid].goodput_tps)} tok/s, CI "
                         f"{ci_text(ctx.knees[cid])} tok/s)" for cid in view.ties)
        lines += [f"> **Ties**: {tied}: each 95% CI overlaps the winner's, so these data do not rank "
                  f"{'it' if len(view.ties) == 1 else 'them'} below the winner.", ""]
    aside = [(r.concurrency, st.goodput_tps or 0.0) for r in ctx.runs
             if r.server_config_id == winner.id and r.status == "completed" and ladder_phase(r.phase) == knee.phase
             and (st := r.stats) is not None and st.client_bound and st.passes_sla
             and (st.goodput_tps or 0.0) > knee.goodput_tps]
    if aside:  # issue 28 §5: a flagged window is never the knee; one with more goodput was set aside
        at = ", ".join(f"c={c} ({fmt(g)} tok/s)" for c, g in aside)
        lines += [f"> **Client-bound window set aside**: {at} passed with more goodput than the knee, but the "
                  "load generator's self-check flagged it, so it is not the knee until measured again unflagged "
                  "(more client processes: `--client-procs`).", ""]
    if not launch:
        return [*lines, "Launch it with the command in the answer above.", ""]
    model = env.model_path or "MODEL"
    extra_args = ctx.raw("server").get("extra_args")
    extra = [str(a) for a in extra_args] if isinstance(extra_args, list) else []
    lines += ["```", launch_command(model, winner.config.knobs(), extra, study_dialect(ctx.profile_raw)), "```", ""]
    for warning in launch_warnings(model, extra):
        lines += [warning, ""]
    return lines
