"""Where a verb writes a file the user named (`export --out`, `dataset convert -o`, `compare --out`,
`history --plot`): never onto the results database (or its -wal/-shm/-journal companions), never over an existing
file unless --force, never half-written. The output goes to a temporary file beside the target, renamed over it
only when whole; a failure leaves the target as it was and no temporary file behind."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

from sweep.core.errors import UsageError

_COMPANIONS = ("", "-wal", "-shm", "-journal")


def database_file(db_url: str) -> Path | None:
    """The SQLite file a results-database URL names; None for another database or an in-memory one."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        url = make_url(db_url)
    except ArgumentError:
        return None
    name = url.database
    if url.get_backend_name() != "sqlite" or not name or name == ":memory:" or name.startswith("file:"):
        return None
    return Path(name).expanduser()


def _same(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b) or a.resolve() == b.resolve()
    except OSError:
        return False


def check_out(out: Path, flag: str, *, force: bool, db_url: str | None = None,
              inputs: Sequence[Path] = (), force_flag: str = "--force") -> None:
    """Refuse (UsageError, exit 2) an output path that is the results database or one of its companion files
    (always), an input of the command (always: its rows are being read), a folder, or an existing file (unless
    force)."""
    db = database_file(db_url) if db_url is not None else None
    if db is not None:
        for suffix in _COMPANIONS:
            if _same(out, db.with_name(db.name + suffix)):
                raise UsageError(f"{flag} {out} is the results database{' ' + suffix[1:] + ' file' if suffix else ''}"
                                 f" ({db}): refused, it would destroy the study; name another file")
    for given in inputs:
        if _same(out, given):
            raise UsageError(f"{flag} {out} is the file being read: name another file")
    if out.is_dir():
        raise UsageError(f"{flag} {out} is a folder: name a file")
    if out.exists() and not force:
        raise UsageError(f"{flag} {out} exists: not overwritten (pass {force_flag} to replace it)")


def _mode(out: Path) -> int:
    """The permissions the new file gets: the replaced file's, else what the umask leaves of rw-rw-rw-."""
    try:
        return out.stat().st_mode & 0o7777
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


@contextlib.contextmanager
def replaced(out: Path, flag: str) -> Iterator[Path]:
    """A temporary path beside `out` to write; renamed over `out` when the block ends without an error, removed
    when it raises. A folder that cannot take the file is one UsageError line."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=f".part{out.suffix}", dir=out.parent if str(out.parent) else ".")
    except OSError as exc:
        raise UsageError(f"{flag} {out}: cannot write there ({exc.strerror or exc})") from None
    os.close(fd)
    part = Path(tmp)
    try:
        os.chmod(part, _mode(out))
        yield part
        with open(part, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(part, out)
    finally:
        part.unlink(missing_ok=True)


@contextlib.contextmanager
def text_out(out: Path, flag: str) -> Iterator[IO[str]]:
    """A text file (UTF-8, newline as written) that becomes `out` only when whole (see replaced)."""
    with replaced(out, flag) as part, part.open("w", encoding="utf-8", newline="") as fh:
        yield fh
