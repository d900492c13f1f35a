"""`sweep explain STUDY [--config ID]`: why each configuration's knee is where it is (its binding constraint, with
the numbers that show it and what to try next), per SLA tier, from the store alone; and the tier files of
`sweep report --tier`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from sweep.cli.app import DEFAULT_DB, app, db_url
from sweep.core.errors import NotFound, UsageError

if TYPE_CHECKING:
    from sweep.profile import Tier


def load_tiers(path: Path) -> list[Tier]:
    """The tiers of a YAML file: one mapping (name and SLA bounds) or a list of them; one UsageError line if bad."""
    import yaml
    from pydantic import ValidationError

    from sweep.profile import Tier

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8-sig"))
    except OSError as exc:
        raise UsageError(f"--tier {path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"--tier {path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"--tier {path}: not valid YAML ({' '.join(str(exc).split())})") from None
    items = data if isinstance(data, list) else [data]
    if not items:
        raise UsageError(f"--tier {path}: an empty list: no tier to judge")
    out = []
    for item in items:
        if not isinstance(item, dict):
            raise UsageError(f"--tier {path}: a tier is a mapping with a name and SLA bounds (ttft_ms, tpot_ms, ...)")
        try:
            out.append(Tier.model_validate({**item, "primary": False}))
        except ValidationError as err:
            e = err.errors()[0]
            where = ".".join(str(p) for p in e["loc"]) or "<root>"
            raise UsageError(f"--tier {path}: {where}: {' '.join(e['msg'].split())}") from None
    return out


@app.command()
def explain(study: str = typer.Argument(..., help="study name"), db: str = typer.Option(DEFAULT_DB),
            config: int | None = typer.Option(None, "--config", help="one configuration (its id, as `sweep runs` "
                                              "and the report's Why section show)"),
            tier: list[Path] = typer.Option([], "--tier", help="also judge this SLA tier file on the stored windows"),
            fmt: str = typer.Option("table", "--format", help="table (text lines) | json"),
            ) -> None:
    """Why each configuration's knee is where it is: the binding constraint per tier, with its numbers."""
    if fmt not in ("table", "json"):
        raise UsageError(f"--format {fmt!r}: expected table or json")
    from sweep.report.answer import explain_lines
    from sweep.store import Store
    from sweep.views.answer import build_answer
    from sweep.views.context import answer_context

    extra = [t for p in tier for t in load_tiers(p)]
    store = Store(db_url(db), readonly=True)
    s = store.get_study_by_name(study)
    if s is None:
        raise NotFound(f"no study named {study} in {db}")
    ctx = answer_context(store, s.id)  # no requests unless a tier with other bounds is judged on them
    if config is not None and config not in {c.id for c in ctx.configs}:
        raise UsageError(f"--config {config}: study {study} has no configuration {config}")
    answer = build_answer(store, ctx, extra)
    if fmt == "json":
        from sweep.cli.jsonout import emit

        emit("explain", {"study": study, "config": config, "answer": answer.document(config)})
        return
    typer.echo("\n".join(explain_lines(answer, config)))
