"""The files a profile names (`workload.dataset.path`, a trace's `arrival.path`): absolute as given; relative,
in the profile's folder, then in the working directory. A missing or malformed one is one ProfileError line that
says where sweep looked, before anything is measured or written."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, TypeVar

from sweep.core.errors import ProfileError
from sweep.profile.arrival import Arrival, TraceArrival
from sweep.profile.trace import load_trace
from sweep.profile.workload import Workload


class NamesInputs(Protocol):
    """What of a profile names input files (sweep.profile.Profile is one): its workload, its arrival process and
    the folder its relative paths are relative to."""

    _folder: Path | None

    @property
    def workload(self) -> Workload: ...

    @property
    def arrival(self) -> Arrival: ...


P = TypeVar("P", bound=NamesInputs)


def locate_inputs(prof: P, folder: Path | None, where: str, hint: str = "") -> P:
    """Find prof's input files, first in `folder` (the profile file's, or the one a worker is given); `where`
    opens every error line (the profile file, or the study it came from), `hint` ends one for a missing file."""
    prof._folder = folder
    if prof.workload.dataset is not None:
        prof.workload.dataset._resolved = find_input(folder, where, "workload.dataset.path",
                                                     prof.workload.dataset.path, hint)
    if isinstance(prof.arrival, TraceArrival):
        prof.arrival._resolved = find_input(folder, where, "arrival.path", prof.arrival.path, hint)
        _check_trace(where, prof.arrival)
    return prof


def relative_inputs(prof: NamesInputs) -> list[str]:
    """The input paths of prof that are relative (a worker elsewhere needs the folder they are relative to)."""
    raw = [prof.workload.dataset.path if prof.workload.dataset is not None else None,
           prof.arrival.path if isinstance(prof.arrival, TraceArrival) else None]
    return [r for r in raw if r is not None and not Path(r).expanduser().is_absolute()]


def find_input(folder: Path | None, where: str, field: str, raw: str, hint: str = "") -> Path:
    """The file `raw` names: absolute as given; relative, in `folder` (when known), then the working directory.
    Missing: one line that says where it looked."""
    path = Path(raw).expanduser()
    if path.is_absolute():
        tried = [path]
    else:
        tried = [*([folder / path] if folder is not None else []), Path.cwd() / path]
    for candidate in tried:
        if candidate.is_file():
            return candidate
    looked = " or ".join(str(t) for t in dict.fromkeys(tried))
    raise ProfileError(f"{where}: {field}: {raw}: no such file (looked for {looked}){hint}")


def _check_trace(where: str, arrival: TraceArrival) -> None:
    """The trace file parses (timestamps, non-decreasing, finite): its problem is the profile's, at load time."""
    try:
        load_trace(arrival.file, arrival.time_scale)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ProfileError(f"{where}: arrival.path: {' '.join(str(exc).split())}") from None
