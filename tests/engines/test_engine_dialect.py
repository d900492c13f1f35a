"""A second engine is one Dialect and one register line: a throwaway `toy` dialect runs a smoke ladder."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from sweep import engines
from sweep.core.errors import ProfileError
from sweep.core.types import ServerConfig
from sweep.drivers import flush
from sweep.engines import SGLANG, Dialect, Paths
from sweep.profile import load_profile
from sweep.study.orchestrator import Orchestrator

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "profiles" / "smoke.yaml"
ASKED: list[str] = []  # the request paths the toy dialect handed out


@dataclass(frozen=True)
class _SpyPaths(Paths):
    """The toy engine's paths, noting each streamed request's path."""

    def request(self, api: str) -> str:
        path = super().request(api)
        ASKED.append(path)
        return path


# The simulator speaks SGLang; the toy engine takes its other spellings of two paths and another launch module.
TOY = replace(SGLANG, name="toy", launch_module="toy_engine.serve",
              paths=_SpyPaths(**{**vars(SGLANG.paths), "health": "/health_generate",
                                 "server_info": "/get_server_info"}))


@pytest.fixture
def toy() -> Iterator[Dialect]:
    engines.register(TOY)
    ASKED.clear()
    try:
        yield TOY
    finally:
        engines.unregister(TOY.name)


def test_the_registry_names_get_and_forget_an_engine(toy: Dialect) -> None:
    assert engines.names() == ("sglang", "toy") and engines.get("toy") is toy
    assert toy.server_argv("m", ServerConfig(max_running_requests=4), ["--x"], ("127.0.0.1", 9)) == [
        "--model-path", "m", "--host", "127.0.0.1", "--port", "9", "--enable-metrics",
        "--max-running-requests", "4", "--x"]
    engines.unregister("toy")
    with pytest.raises(KeyError, match="unknown engine 'toy' \\(known: sglang\\)"):
        engines.get("toy")


def test_an_unknown_engine_in_a_profile_is_one_clear_error() -> None:
    with pytest.raises(ProfileError) as exc:
        load_profile(SMOKE, {"server.engine": "vllm"})
    msg = str(exc.value)
    assert "server.engine" in msg and "unknown engine 'vllm' (choose from sglang)" in msg
    assert "\n" not in msg.strip()


def test_owned_flags_are_the_engines(toy: Dialect) -> None:
    with pytest.raises(ProfileError, match="--port: set by the launcher"):
        load_profile(SMOKE, {"server.engine": "toy", "server.extra_args": ["--port", "1"]})


@pytest.mark.integration
@pytest.mark.slow
def test_a_smoke_ladder_runs_through_a_registered_toy_dialect(toy: Dialect, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    flushed: list[str | None] = []
    real_flush = flush.flush_over_http

    def spy_flush(url: str, headers: dict[str, str], timeout_s: float = 30.0,
                  clock: Callable[[], float] = time.monotonic, path: str | None = None) -> str | None:
        flushed.append(path)
        return real_flush(url, headers, timeout_s, clock, path)

    monkeypatch.setattr(flush, "flush_over_http", spy_flush)
    prof = load_profile(SMOKE, {"server.engine": "toy", "search.space.max_running_requests": [8],
                                "ladder": [2, 4], "window.measure_seconds": 2.0})
    db = tmp_path / "r.db"
    Orchestrator(prof, f"sqlite:///{db}", tmp_path, launcher_kind="sim", driver="http").knee("toy")
    con = sqlite3.connect(db)
    runs = con.execute("SELECT concurrency, status, n_completed FROM runs ORDER BY concurrency").fetchall()
    assert [(c, s) for c, s, _ in runs] == [(2, "completed"), (4, "completed")] and all(n > 0 for *_, n in runs)
    assert con.execute("SELECT count(*) FROM samples WHERE name='num_running_reqs'").fetchone()[0] > 0
    extra = json.loads(con.execute("SELECT extra_json FROM environments").fetchone()[0])
    assert extra["engine"] == "toy"
    assert set(ASKED) == {"/generate"} and len(ASKED) > 0  # every streamed request asked the toy dialect
    assert flushed and set(flushed) == {"/flush_cache"}
    study = con.execute("SELECT status, report_path FROM sweep_studies").fetchone()
    assert study[0] == "completed"
    assert "python -m toy_engine.serve" in Path(study[1]).read_text()  # the report's command is the toy engine's
