"""The schema revisions this sweep reads, and the one rule for a reading command on a database's revision.

Read from the packaged migration files' `revision = "..."` / `down_revision = "..."` lines, so a reading command
(through SQLAlchemy or Python's own sqlite3) checks a database without loading Alembic or SQLAlchemy. A reading
command never migrates: a database at another revision than this sweep's head is refused in one line (an older
one: run `sweep db upgrade`), since an older sweep refuses a database a newer one has migrated.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from sweep.core.errors import StoreError

if TYPE_CHECKING:
    from alembic.config import Config  # Alembic loads where a database migrates, not where one is read

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
VERSION_TABLE = "sweep_alembic_version"  # sweep's own, so Optuna's RDB storage can share the database
_REVISION = re.compile(r'^(down_revision|revision) = (?:"([^"]+)"|None)$', re.MULTILINE)


def packaged_revisions() -> tuple[str | None, frozenset[str]]:
    """(the head revision, every revision) of the packaged migrations, read from their `revision = "..."` and
    `down_revision = "..."` lines: a reading command checks a database's revision without loading Alembic. Where
    the files do not give one head, Alembic's own script directory decides."""
    revs: set[str] = set()
    downs: set[str] = set()
    for path in (MIGRATIONS / "versions").glob("*.py"):
        found = dict((k, v) for k, v in _REVISION.findall(path.read_text()))
        if found.get("revision"):
            revs.add(found["revision"])
            downs.add(found.get("down_revision", ""))
    heads = revs - downs
    if len(heads) == 1:
        return next(iter(heads)), frozenset(revs)
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config())
    return script.get_current_head(), frozenset(s.revision for s in script.walk_revisions())


def alembic_config(url: str | None = None) -> Config:
    """An Alembic Config for the packaged migrations, no alembic.ini needed.

    For a new revision: command.revision(alembic_config("sqlite:///results.db"), "message", autogenerate=True).
    """
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    if url is not None:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def one_revision(revs: list[str]) -> str | None:
    """The one revision the version table holds (None: empty); several is no sweep database."""
    if len(revs) > 1:
        raise StoreError(f"the database has {len(revs)} schema revisions ({', '.join(revs)}): not a sweep database")
    return revs[0] if revs else None


def check_readable(current: str | None, where: str) -> None:
    """Refuse, in one line, a database at `current` that this sweep does not read as it is (`where` names it)."""
    head, known = packaged_revisions()
    if current == head:
        return
    if current is None:
        raise StoreError(f"{where} is not a sweep results database (no schema revision in it)")
    if current not in known:
        raise StoreError(f"{where} was written by a newer sweep (schema revision {current}; this one reads "
                         f"{head}): use that sweep, or upgrade this one")
    raise StoreError(f"{where} is at an older schema (revision {current}; this sweep reads {head}): run `sweep "
                     f"db upgrade --db {where}` to upgrade it in place (sweeps older than this one will no "
                     "longer open it), then run this command again")
