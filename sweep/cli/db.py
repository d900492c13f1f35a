"""`sweep db upgrade`: migrate a results database to this sweep's schema, the one verb that does it on purpose.

The verbs that read (runs, show, report, compare, explain, serve) never migrate: an older sweep refuses a database
a newer one has upgraded, so upgrading is asked for here, by name.
"""

from __future__ import annotations

import typer

from sweep.cli.app import DEFAULT_DB, app, console, db_url

db_app = typer.Typer(help="The results database itself: `sweep db upgrade`.", no_args_is_help=True)


@db_app.command("upgrade")
def upgrade(db: str = typer.Option(DEFAULT_DB, help="results database (path or SQLAlchemy URL)")) -> None:
    """Upgrade the database's schema in place to this sweep's (Alembic); sweeps older than the schema then refuse it."""
    from sweep.store import Store

    with Store(db_url(db), create=False) as store:
        before, after = store.opened_at, store.revision()
    if before == after:
        console.print(f"{store.shown}: schema already at revision {after}", highlight=False)
    else:
        console.print(f"{store.shown}: schema upgraded from revision {before} to {after}", highlight=False)


app.add_typer(db_app, name="db")
