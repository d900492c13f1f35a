"""`sweep export --format mlflow --tracking-uri URI`: the URI checked before MLflow is handed it.

MLflow makes what a URI names: `sqlite:////any/dir/m.db` creates that folder, an empty URI writes ./mlflow.db,
a URI at the results database adds MLflow's tables to it, and a refused port is retried for minutes. So: an empty
URI is refused, a local store must be in a folder that exists and must not be the results database, a server must
answer a TCP connect within a few seconds, and the password of a URI is never echoed (`shown`).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from sweep.cli.outfile import database_file
from sweep.core.errors import UsageError

CONNECT_S = 5.0  # a tracking server that takes no TCP connection in this long is refused
HTTP_RETRIES = "2"  # MLflow's own retries of a request (its default, 7 with back-off, is minutes on a dead port)


def shown(uri: str) -> str:
    """The URI with any password replaced by ***."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return uri
    if parts.password is None:
        return uri
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def redacted(text: str, uri: str) -> str:
    """`text` (an MLflow error) with the URI shown as `shown` does and its password, wherever it appears, as ***."""
    text = text.replace(uri, shown(uri))
    try:
        password = urlsplit(uri).password
    except ValueError:
        password = None
    return text.replace(password, "***") if password else text


def _local_path(uri: str) -> Path | None:
    """The file or folder a local tracking URI names (sqlite:///PATH, file:PATH, a bare path); None for a server."""
    if uri.startswith("sqlite:"):
        return database_file(uri)
    parts = urlsplit(uri)
    if parts.scheme == "file":
        return Path(unquote(parts.path))
    return Path(uri) if parts.scheme == "" else None


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b) if a.exists() and b.exists() else a.resolve() == b.resolve()
    except OSError:
        return False


def check_tracking_uri(uri: str, db_url: str) -> None:
    """Refuse (UsageError, one line, nothing created) what MLflow would turn into a surprise (module docstring)."""
    if not uri.strip():
        raise UsageError("--tracking-uri is empty (MLflow would write ./mlflow.db): give e.g. file:./mlruns or "
                         "http://host:5000")
    local = _local_path(uri)
    if local is not None:
        results = database_file(db_url)
        if results is not None and _same_file(local, results) or uri.strip() == db_url.strip():
            raise UsageError(f"--tracking-uri {shown(uri)} is the results database: MLflow would add its tables "
                             "to it; name another store")
        folder = local.expanduser().parent  # the store (a SQLite file, a file: folder) may be new, not its folder
        if not folder.is_dir():
            raise UsageError(f"--tracking-uri {shown(uri)}: the folder {folder} does not exist (MLflow would make "
                             "it): create it first")
        return
    if uri.strip() == db_url.strip():
        raise UsageError(f"--tracking-uri {shown(uri)} is the results database: MLflow would add its tables to "
                         "it; name another store")
    parts = urlsplit(uri)
    if parts.scheme in ("http", "https") and parts.hostname:
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise UsageError(f"--tracking-uri {shown(uri)}: the port is not a number from 1 to 65535") from None
        try:
            socket.create_connection((parts.hostname, port), timeout=CONNECT_S).close()
        except OSError as exc:
            raise UsageError(f"--tracking-uri {shown(uri)}: no MLflow server answers there "
                             f"({exc.strerror or exc or 'timed out'})") from None
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", HTTP_RETRIES)
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")
