"""Command lines that cannot do what they ask are refused up front, in one line, exit 2, writing nothing:
attach with several configurations, launcher sglang where sglang is not installed. And the API-key launch shim's
code never shows in an error (it once printed seven lines of it per configuration)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from sweep.cli import main
from sweep.core.errors import LaunchError
from sweep.launchers import flags, keyshim

ROOT = Path(__file__).resolve().parents[2]
SMOKE = str(ROOT / "profiles" / "smoke.yaml")
SHIM_LINES = [ln.strip() for ln in keyshim.SHIM.splitlines() if ln.strip()]


def lines_of(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]


@pytest.mark.parametrize(("sets", "configs"), [
    ([], 2),  # smoke's space: max_running_requests [4, 8]
    (["--set", "search.space.max_running_requests=[4]", "--set", "search.baseline=true"], 2),  # + SGLang's defaults
    (["--set", "search.space.max_running_requests=[4]", "--set", "search.mode=coupled"], 3),  # one launch per step
])
def test_attach_with_several_configurations_is_refused(sets: list[str], configs: int, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["knee", "-p", SMOKE, "--launcher", "attach", "--set", "server.url=http://127.0.0.1:9",
               "--db", str(tmp_path / "r.db"), "--out", str(tmp_path / "out"), *sets])
    lines = lines_of(capsys)
    assert rc == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"error: launcher attach measures one running server, but this study has {configs} "
                               "configurations"), lines
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(importlib.util.find_spec("sglang") is not None, reason="sglang is installed here")
@pytest.mark.parametrize("how", [["--launcher", "sglang"], ["--set", "server.launcher=sglang"]])
def test_launcher_sglang_without_sglang_is_one_line_before_any_launch(how: list[str], tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["knee", "-p", SMOKE, *how, "--db", str(tmp_path / "r.db"), "--out", str(tmp_path / "out"),
               "--no-progress"])
    lines = lines_of(capsys)
    assert rc == 2 and len(lines) == 1, lines
    assert lines[0].startswith("error: launcher sglang: sglang not importable in ") and "No module named" in lines[0]
    assert not any(s in lines[0] for s in SHIM_LINES)
    assert list(tmp_path.iterdir()) == []  # no database, no reports: nothing launched, nothing stored


def test_a_failed_help_names_the_module_never_the_shim() -> None:
    """The launcher's `--help` probe of a module that is not there: the real error, the command as `-m`."""
    with pytest.raises(LaunchError) as caught:
        flags.help_text(keyshim.command(sys.executable, "no_such_module_for_sweep"))
    text = str(caught.value)
    assert f"`{sys.executable} -m no_such_module_for_sweep --help` failed (exit 1)" in text
    assert "No module named no_such_module_for_sweep" in text or "no_such_module_for_sweep" in text.split(": ", 1)[1]
    assert "\n" not in text and not any(s in text for s in SHIM_LINES), text


def test_scrub_takes_the_shim_out_of_a_command_and_a_traceback() -> None:
    argv = " ".join(keyshim.command("/usr/bin/python3", "sglang.launch_server"))
    assert keyshim.scrub(f"`{argv} --help` failed") == "`/usr/bin/python3 -m sglang.launch_server --help` failed"
    quoted = ("Traceback (most recent call last):\n  File \"<string>\", line 7, in <module>\n"
              "    runpy.run_module(module, run_name='__main__', alter_sys=True)\n"
              "ModuleNotFoundError: No module named 'sglang'")
    assert keyshim.scrub(quoted).splitlines() == ["Traceback (most recent call last):",
                                                  "  File \"<string>\", line 7, in <module>",
                                                  "ModuleNotFoundError: No module named 'sglang'"]


def test_a_crosscheck_on_the_virtual_driver_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """(`sweep crosscheck --driver` takes auto or http only; `knee --crosscheck` takes any driver, and says why not.)"""
    rc = main(["knee", "-p", SMOKE, "--crosscheck", "--driver", "virtual", "--db", str(tmp_path / "r.db"),
               "--out", str(tmp_path / "out")])
    lines = lines_of(capsys)
    assert rc == 2 and len(lines) == 1 and "a cross-check compares clients over real sockets" in lines[0], lines
    assert list(tmp_path.iterdir()) == []
