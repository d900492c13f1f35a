"""The one boundary where an exception becomes one line and an exit code (httpx-style: one tree, mapped once).

`run(invoke, argv)` calls invoke() (the Typer app in click's standalone mode) and maps what escapes it:
SweepError subclasses carry their own exit code (ProfileError and UsageError 2, LaunchError 3, StoreError 5,
CrossCheckDiffers 6, ...);
typer's own usage errors exit 2; Ctrl-C, SIGTERM, SIGHUP 128 + the signal; an OS failure such as a full disk 1;
a database failure in Optuna's storage 5. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

import typer

from sweep.core import interrupt
from sweep.core.errors import StoreError, SweepError


def _one_line(text: str, fallback: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[0] if lines else fallback


def _os_error_line(exc: OSError) -> str:
    """An OS failure (disk full, permission denied) as one line naming the file."""
    what = exc.strerror or _one_line(str(exc), type(exc).__name__)
    name = exc.filename if exc.filename is not None else None
    return f"{name}: {what}" if name is not None else what


class _NoTrialTraceback(logging.Filter):
    """Optuna logs a trial that raised as two warnings (the second with the traceback) before re-raising.

    For the errors main() reports itself (Ctrl-C, a SweepError, an OS failure) both are dropped: the user
    sees one line, not a traceback followed by the same error again.
    """

    LOGGER = "optuna.study._optimize"

    def __init__(self) -> None:
        super().__init__()
        self._swallowing = False

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and (isinstance(exc, KeyboardInterrupt | SweepError | OSError)
                                or _database_error_line(exc) is not None):
            self._swallowing = True
            return False
        if self._swallowing and "failed with value" in str(record.msg):
            self._swallowing = False
            return False
        return True


def run(invoke: Callable[[], object], argv: list[str] | None = None) -> int:
    """Run one `sweep` command and return its exit code (the module docstring says which)."""
    quiet = _NoTrialTraceback()
    optuna_log = logging.getLogger(quiet.LOGGER)
    optuna_log.addFilter(quiet)
    try:
        # typer reports its own usage errors (exit 2) and turns Ctrl-C into exit 130; the rest propagates here.
        invoke()
        rc: int = 0
    except SystemExit as done:
        stop = _interrupt_behind(done)  # typer turns KeyboardInterrupt into a silent exit 130
        if stop is not None:
            return _interrupted(stop, argv)
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except SweepError as exc:
        typer.echo(f"error: {_one_line(str(exc), type(exc).__name__)}", err=True)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        return _interrupted(exc, argv)
    except OSError as exc:
        typer.echo(f"error: {_os_error_line(exc)}", err=True)
        return 1
    except Exception as exc:  # noqa: BLE001 - re-raised below unless it is a database failure
        line = _database_error_line(exc)
        if line is None:
            raise  # a bug: keep its traceback
        typer.echo(f"error: {line}", err=True)
        return StoreError.exit_code
    finally:
        optuna_log.removeFilter(quiet)
    return rc


def _database_error_line(exc: BaseException) -> str | None:
    """A database failure outside sweep's store (Optuna's storage shares the database): disk full, I/O, locks."""
    from sweep.store.errors import database_error

    mapped = database_error(exc, "the results database failed")
    return None if mapped is None else _one_line(str(mapped), type(mapped).__name__)


def _interrupt_behind(exc: BaseException) -> KeyboardInterrupt | None:
    """The KeyboardInterrupt (Ctrl-C, or SIGTERM/SIGHUP inside a study) an exit was raised from, if any."""
    seen: BaseException | None = exc
    for _ in range(4):
        if seen is None:
            return None
        if isinstance(seen, KeyboardInterrupt):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _interrupted(exc: KeyboardInterrupt, argv: list[str] | None) -> int:
    """Ctrl-C, SIGTERM or SIGHUP: one line, exit 128 + the signal. A study's server is already stopped."""
    sig = interrupt.received(exc)
    command = (sys.argv[1:] if argv is None else argv)[:1]
    study = command in (["knee"], ["sweep"])
    hint = (": the server was stopped and the attempt marked aborted; run the same command with --resume to "
            "measure it again") if study else ""
    typer.echo(f"error: interrupted by {sig.name}{hint}", err=True)
    return interrupt.exit_code(sig)
