"""Attach mode against a server started with an API key (issue 23 §4): the key comes from SWEEP_API_KEY or
server.api_key_file (never argv), goes out on every request, and a 401 says whether a key was sent at all."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from sweep.core.errors import LaunchError, ProfileError
from sweep.core.types import ServerConfig
from sweep.ladder.wiring import make_launcher
from sweep.launchers.attach import API_KEY_ENV, AttachLauncher, attach_api_key
from sweep.profile import load_profile
from tests.launchers.test_launcher_sglang import (
    ROOT,
    needs_sim,
)
from tests.simserver import sim_server

KEY = "attach-test-key-0123456789"


def test_the_key_comes_from_the_file_else_the_environment(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(f"{KEY}\nsecond line ignored\n")
    assert attach_api_key(str(key_file), {API_KEY_ENV: "from-env"}) == KEY
    assert attach_api_key(None, {API_KEY_ENV: "from-env"}) == "from-env"
    assert attach_api_key(None, {}) is None
    with pytest.raises(ProfileError, match="cannot read it"):
        attach_api_key(str(tmp_path / "missing"), {})
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ProfileError, match="empty"):
        attach_api_key(str(tmp_path / "empty"), {})


def test_the_launcher_is_given_the_key_and_a_key_file_outside_attach_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(API_KEY_ENV, KEY)
    prof = load_profile(ROOT / "profiles" / "smoke.yaml", {"server.url": "http://127.0.0.1:1"})
    launcher = make_launcher(prof, "attach", "http", tmp_path)
    assert isinstance(launcher, AttachLauncher) and launcher.api_key == KEY
    key_file = tmp_path / "key"
    key_file.write_text(KEY)
    with pytest.raises(ProfileError, match="for launcher attach only"):
        make_launcher(load_profile(ROOT / "profiles" / "smoke.yaml", {"server.api_key_file": str(key_file)}),
                      "sim", "virtual", tmp_path)


@needs_sim
def test_a_401_says_whether_a_key_was_sent() -> None:
    with sim_server("--api-key", KEY) as url:
        with pytest.raises(LaunchError) as none_sent:
            AttachLauncher(url).start(ServerConfig())
        with pytest.raises(LaunchError) as wrong:
            AttachLauncher(url, api_key="not-the-key").start(ServerConfig())
        handle = AttachLauncher(url, api_key=KEY).start(ServerConfig())
    assert "the server refused the request: no API key was sent (set SWEEP_API_KEY" in str(none_sent.value)
    assert "the API key sent was refused" in str(wrong.value) and "not-the-key" not in str(wrong.value)
    assert handle.headers() == {"Authorization": f"Bearer {KEY}"}


@needs_sim
@pytest.mark.slow
@pytest.mark.parametrize("source", ["env", "file"])
def test_ladder_on_an_attached_server_with_a_key_measures_and_never_stores_it(source: str, tmp_path: Path) -> None:
    key_file = tmp_path / "server.key"
    key_file.write_text(KEY + "\n")
    env = {k: v for k, v in os.environ.items() if k != API_KEY_ENV}
    extra = ["--set", f"server.api_key_file={key_file}"] if source == "file" else []
    if source == "env":
        env[API_KEY_ENV] = KEY
    db = tmp_path / "results.db"
    with sim_server("--api-key", KEY) as url:
        proc = subprocess.run(
            [sys.executable, "-m", "sweep.cli", "ladder", "--profile", str(ROOT / "profiles" / "smoke.yaml"),
             "--launcher", "attach", "--set", f"server.url={url}", "--set", "ladder=[2]", *extra,
             "--db", str(db), "--out", str(tmp_path / "reports")],
            capture_output=True, text=True, timeout=300, cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    con = sqlite3.connect(db)
    [(started, errors, reason)] = con.execute("SELECT n_started, n_errors, reason FROM runs").fetchall()
    assert started > 0 and errors == 0 and reason is None  # generate and /flush_cache both carried the key
    assert con.execute("SELECT count(*) FROM samples WHERE source='metrics'").fetchone()[0] > 0
    con.close()
    for f in [db, *(tmp_path / "reports").rglob("*")]:
        assert not f.is_file() or KEY.encode() not in f.read_bytes(), f
