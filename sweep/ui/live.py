"""`sweep serve`: one page that watches a study from its database (sweep/views/live.py says what it shows).

The page is static HTML + vendored uPlot (sweep/ui/live_static, no build step); the server embeds the current
state in it and the page polls /state.json. It binds 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Callable
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from sweep.core.errors import StoreError
from sweep.profile import is_loopback
from sweep.store import Store
from sweep.views.live import read_state

STATIC = Path(__file__).resolve().parent / "live_static"
# what no JSON text embedded in a <script> element may hold raw: `<` could open `<!--` or close `</script>`, `&` an
# entity, U+2028/2029 end a line in older script parsers; inside JSON they only occur in strings, where \uXXXX is them
_EMBED = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
                        "\u2029": "\\u2029"})


def embed_json(text: str) -> str:
    """JSON text safe inside a <script> element: the same value, with no character that HTML parsing sees."""
    return text.translate(_EMBED)


def make_app(db_url: str, study: str | None = None) -> Starlette:
    """The page for `study` (default: the newest study in the database, looked up on every request)."""
    store = Store(db_url, readonly=True)
    page = (STATIC / "live.html").read_text()

    def state_json(request: Request) -> str | None:
        name = request.query_params.get("study") or study
        row = store.get_study_by_name(name) if name else store.latest_study()
        return None if row is None else read_state(store, row.id).as_json()

    def index(request: Request) -> Response:
        state = state_json(request)
        if state is None:
            # `sweep serve` is often started before the study: this page asks again until the study is there
            return HTMLResponse(f'<meta http-equiv="refresh" content="2"><p>no study {html.escape(study or "")} in '
                                "this database yet (this page looks again every 2 s)</p>", status_code=404)
        title = html.escape(request.query_params.get("study") or study or "newest study")
        return HTMLResponse(page.replace("__TITLE__", title).replace("__STATE__", embed_json(state)))

    def state(request: Request) -> Response:
        body = state_json(request)
        if body is None:
            return JSONResponse({"error": "no such study"}, status_code=404)
        return Response(body, media_type="application/json", headers={"Cache-Control": "no-store"})

    return Starlette(routes=[Route("/", index), Route("/state.json", state),
                             Mount("/static", StaticFiles(directory=STATIC), name="static")])


class LiveServer:
    """uvicorn serving the page in a background thread (for `--live` beside a running study)."""

    def __init__(self, db_url: str, study: str | None, host: str = "127.0.0.1", port: int = 8765):
        import uvicorn

        config = uvicorn.Config(make_app(db_url, study), host=host, port=port, log_level="warning",
                                lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self, timeout_s: float = 10.0) -> str:
        """Start serving; the page's URL once the socket listens."""
        self.thread.start()
        ready = threading.Event()
        deadline = timeout_s
        while not self.server.started and self.thread.is_alive() and deadline > 0:
            ready.wait(0.05)
            deadline -= 0.05
        if not self.server.started:
            raise OSError(f"the live page could not listen on {self.server.config.host}:{self.server.config.port} "
                          "(in use? port 0 takes a free one: sweep serve --port 0, --live-port 0)")
        return self.url

    @property
    def url(self) -> str:
        port = self.server.servers[0].sockets[0].getsockname()[1] if self.server.servers else self.server.config.port
        return f"http://{self.server.config.host}:{port}/"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=5)


def check_servable(db_url: str) -> None:
    """A SQLite database to watch must exist and hold sweep's tables: read, never made, migrated or switched to WAL."""
    import sqlite3

    from sqlalchemy import make_url

    url = make_url(db_url)
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return
    path = Path(url.database)
    if not path.is_file():
        raise StoreError(f"no results database at {path} (run a study first, or pass --db)")
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: not a sweep results database ({exc})") from None
    if "sweep_studies" not in tables:
        raise StoreError(f"{path}: not a sweep results database (no sweep tables)")


def serve(db_url: str, study: str | None, host: str, port: int, say: Callable[[str], object] = print) -> None:
    """Serve in the foreground until Ctrl-C (or SIGTERM); port 0 takes a free port, and the line says which."""
    check_servable(db_url)
    if not is_loopback(host):
        say(f"warning: the live page listens on {host}: other hosts can read the study")
    live = LiveServer(db_url, study, host, port)
    say(f"live page {live.start()} (Ctrl-C stops it)")
    try:
        while live.thread.is_alive():
            live.thread.join(timeout=0.5)
    finally:
        live.stop()
