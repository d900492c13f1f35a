"""The simulator is its own package (sglang_sim): it imports nothing from sweep or launchers, and the virtual
launcher hands it the knobs of a ServerConfig directly, not as argv."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from sglang_sim import cli as sim_cli
from sweep.core.types import ServerConfig
from sweep.engines import SGLANG
from sweep.launchers.sglang import SGLangLauncher
from sweep.launchers.virtual import VirtualLauncher
from sweep.profile import ServerSpec

ROOT = Path(__file__).resolve().parents[2]
TINY = str(ROOT / "models" / "tiny-llama")


def test_the_simulator_imports_nothing_from_sweep_or_launchers() -> None:
    imported = set()
    for path in (ROOT / "sglang_sim").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
    assert not imported & {"sweep", "launchers", "bench", "tools"}
    # and at run time: loading the whole server pulls in neither
    code = ("import sys, sglang_sim.cli, sglang_sim.server, sglang_sim.openai_api; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'sweep', 'launchers'}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_simulator_prints_the_ready_line_launchers_wait_for() -> None:
    assert sim_cli.READY_LINE == SGLANG.ready_line


def test_virtual_launcher_gives_the_engine_the_configs_knobs_and_the_profiles_extra_args() -> None:
    launcher = VirtualLauncher(extra_args=["--disable-radix-cache", "--max-running-requests", "7"], model_path=TINY)
    handle = launcher.start(ServerConfig(max_running_requests=24, chunked_prefill_size=1024, schedule_policy="lpm"))
    eng = handle.engine
    assert eng is not None
    assert (eng.knobs.max_running_requests, eng.knobs.chunked_prefill_size, eng.knobs.schedule_policy) == \
        (24, 1024, "lpm")  # the configuration wins over a knob in extra_args, as a later flag would
    assert eng.knobs.disable_radix_cache and eng.knobs.mem_fraction_static is None
    assert (eng.cfg.max_running_requests, eng.cfg.chunked_prefill_size) == (24, 1024)
    assert handle.server_info["max_running_requests"] == 24 and handle.server_info["schedule_policy"] == "lpm"
    policy = launcher.start(ServerConfig(schedule_policy="hrrn")).server_info["unmodelled_flags"]
    assert isinstance(policy, list)
    assert any(str(line).startswith("--schedule-policy hrrn: scheduled as fcfs") for line in policy)
    plain = launcher.start(ServerConfig()).engine
    assert plain is not None and plain.knobs.max_running_requests == 7


def test_a_launcher_records_what_it_launched(tmp_path: Path) -> None:
    spec = ServerSpec(model_path=TINY)
    assert SGLangLauncher(spec, tmp_path, module="sglang_sim", simulated=True, validate=False).kind == "sim"
    assert SGLangLauncher(spec, tmp_path).kind == "sglang"
    assert VirtualLauncher(model_path=TINY).kind == "virtual"
