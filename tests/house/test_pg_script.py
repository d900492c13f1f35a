"""scripts/pg.sh gives each checkout its own PostgreSQL: two `make test` runs never share or stop each other's."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not glob.glob("/usr/lib/postgresql/*/bin"), reason="no PostgreSQL binaries here")]


@pytest.fixture
def two_checkouts() -> Iterator[tuple[Path, Path]]:
    # Not under pytest's tmp_path: that is private to this user, and the server runs as `postgres` when root.
    base = Path(tempfile.mkdtemp(prefix="sweep-pg-test-", dir="/tmp"))
    base.chmod(0o755)
    dirs = []
    for name in ("a", "b"):
        (base / name / "scripts").mkdir(parents=True)
        shutil.copy(ROOT / "scripts" / "pg.sh", base / name / "scripts" / "pg.sh")
        dirs.append(base / name)
    try:
        yield dirs[0], dirs[1]
    finally:
        for d in dirs:
            pg(d, "stop")
        shutil.rmtree(base, ignore_errors=True)


def pg(checkout: Path, action: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PGDATA_DIR", "SWEEP_PG_PORT")}
    return subprocess.run(["bash", str(checkout / "scripts" / "pg.sh"), action], capture_output=True, text=True,
                          timeout=180, env=env, cwd=checkout)


def answers(url: str) -> bool:
    import psycopg

    try:
        with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), connect_timeout=5) as conn:
            return conn.execute("SELECT 1").fetchone() == (1,)
    except psycopg.Error:
        return False


def test_each_checkout_has_its_own_server_and_stopping_one_leaves_the_other(two_checkouts: tuple[Path, Path]) -> None:
    a, b = two_checkouts
    start_a, start_b = pg(a, "start"), pg(b, "start")
    assert start_a.returncode == 0 and start_b.returncode == 0, start_a.stderr + start_b.stderr
    url_a, url_b = start_a.stdout.strip(), start_b.stdout.strip()
    assert url_a != url_b
    assert (a / ".pg" / "PG_VERSION").is_file() and (b / ".pg" / "PG_VERSION").is_file()
    assert pg(a, "url").stdout.strip() == url_a  # the port is remembered, so `url` and a restart agree
    assert pg(a, "start").stdout.strip() == url_a  # starting again reuses the running server
    assert answers(url_a) and answers(url_b)
    assert pg(a, "stop").returncode == 0
    assert not answers(url_a)
    assert answers(url_b)  # the other checkout's run keeps its database
