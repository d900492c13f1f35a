"""Issue 22 §6: a built wheel is a working `sweep` anywhere. Built from this checkout, installed into a fresh venv
(its dependencies from this venv's site-packages through a .pth, so no network), run from another directory:
`sweep --help`, `sweep init` (an editable copy of a shipped profile), and `--profile NAME` finding the shipped
profile and model shape folder, with the package imported from the new venv, not the checkout."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(argv: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.integration
@pytest.mark.slow
def test_the_wheel_installs_a_sweep_that_works_from_any_directory(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", str(ROOT), "-w",
                  str(wheels), "-q"], cwd=tmp_path)
    assert built.returncode == 0, built.stderr[-3000:]
    wheel = next(wheels.glob("sweep-*.whl"))

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    site = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     cwd=tmp_path).stdout.strip())
    # this venv's packages (and those it chains to), after the new venv's own: paths only, so no editable finder
    deps = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    (site / "deps.pth").write_text("".join(f"{p}\n" for p in [sysconfig.get_paths()["purelib"], *deps]))
    installed = _run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index",
                      "-q", str(wheel)], cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr[-3000:]

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = _run([str(py), "-c", "import sweep; print(sweep.__file__)"], cwd=elsewhere)
    assert where.stdout.strip().startswith(str(site)), where
    sweep = str(env_dir / "bin" / "sweep")
    helped = _run([sweep, "--help"], cwd=elsewhere)
    assert helped.returncode == 0 and "knee" in helped.stdout and "init" in helped.stdout, helped.stderr

    made = _run([sweep, "init", "mine"], cwd=elsewhere)
    assert made.returncode == 0, made.stderr
    assert (elsewhere / "profiles" / "mine.yaml").read_text().startswith("#")
    again = _run([sweep, "init", "mine"], cwd=elsewhere)
    assert again.returncode == 2 and len(again.stderr.strip().splitlines()) == 1 and "exists" in again.stderr

    for name in ("interactive", "mine", "smoke"):  # shipped, the edited copy, shipped
        planned = _run([sweep, "plan", "--profile", name], cwd=elsewhere)
        assert planned.returncode == 0 and planned.stdout.startswith(f"{name}: "), planned.stderr
    # The shipped model shape folder is found too: its context length bounds the prompts.
    refused = _run([sweep, "plan", "--profile", "smoke", "--set", "server.model_path=models/tiny-llama",
                    "--set", 'workload.prompt_len={"kind": "fixed", "value": 5000}'], cwd=elsewhere)
    assert refused.returncode == 2 and "4,096" in refused.stderr, refused.stderr

    # The smoke knee, end to end from the installed wheel (the simulator, virtual time).
    knee = _run([sweep, "knee", "--profile", "smoke", "--driver", "virtual", "--no-progress", "--db", "r.db",
                 "--out", "out"], cwd=elsewhere)
    assert knee.returncode == 0, (knee.stdout + knee.stderr)[-3000:]
    assert "knee" in knee.stdout + knee.stderr and (elsewhere / "r.db").is_file()
    assert list((elsewhere / "out").glob("*/report.md"))
