"""Flag validation against the captured `launch_server --help` texts of sglang 0.5.17 and 0.5.23."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sweep.core.errors import LaunchError
from sweep.engines import flags_in_argv
from sweep.launchers import flags

FIXTURES = Path(__file__).parents[1] / "fixtures"


@pytest.fixture(scope="module")
def help17() -> str:
    return (FIXTURES / "sglang-0.5.17-launch-server-help.txt").read_text()


@pytest.fixture(scope="module")
def help23() -> str:
    return (FIXTURES / "sglang-0.5.23-launch-server-help.txt").read_text()


def test_parse_finds_every_option_and_alias(help17: str, help23: str) -> None:
    f17, f23 = flags.parse_help_flags(help17), flags.parse_help_flags(help23)
    assert len(f17) >= 471 and len(f23) >= 529  # the fixtures declare 471 and 529 options (+ aliases)
    for f in (f17, f23):
        assert {"--model-path", "--model", "--tp-size", "--tensor-parallel-size", "-h", "--help"} <= f
    assert "--no-enable-tf32-matmul" in f23  # BooleanOptionalAction pair
    assert "--speculative-draft-model" in f23  # alias after a long metavar
    assert not any(x.startswith("---") or x.endswith(",") for x in f23)


def test_cuda_graph_max_bs_valid_in_0517_rejected_in_0523(help17: str, help23: str) -> None:
    flags.validate_flags(["--cuda-graph-max-bs", "64"], help17, "0.5.17")
    with pytest.raises(LaunchError) as err:
        flags.validate_flags(["--cuda-graph-max-bs", "64"], help23, "0.5.23")
    assert err.value.reason == "bad_flag"
    msg = str(err.value)
    assert "--cuda-graph-max-bs is not a flag of sglang 0.5.23" in msg
    assert "did you mean --cuda-graph-max-bs-decode?" in msg
    assert "\n" not in msg


def test_mem_fraction_static_valid_in_both(help17: str, help23: str) -> None:
    for text, version in ((help17, "0.5.17"), (help23, "0.5.23")):
        flags.validate_flags(["--mem-fraction-static", "0.8", "--chunked-prefill-size", "-1",
                              "--schedule-policy=lpm"], text, version)


def test_typo_gets_a_suggestion(help23: str) -> None:
    with pytest.raises(LaunchError, match=r"--mem-fracton-static .*did you mean --mem-fraction-static\?"):
        flags.validate_flags(["--mem-fracton-static", "0.8"], help23, "0.5.23")


def test_unique_abbreviation_is_rejected_too(help23: str) -> None:
    # argparse would accept it today; the next release can make it ambiguous (exit 2), as happened above.
    with pytest.raises(LaunchError, match="abbreviation of --mem-fraction-static"):
        flags.validate_flags(["--mem-fraction", "0.8"], help23, "0.5.23")


def test_every_bad_flag_is_named_and_nonsense_has_no_suggestion(help23: str) -> None:
    with pytest.raises(LaunchError) as err:
        flags.validate_flags(["--zzqx-frobnicate", "--enable-metrics", "--cuda-graph-bs", "8"], help23, "0.5.23")
    msg = str(err.value)
    assert "--zzqx-frobnicate" in msg and "no similar flag" in msg and "--cuda-graph-bs " in msg
    assert "--enable-metrics" not in msg


def test_values_are_not_flags() -> None:
    assert flags_in_argv(["--a", "-1", "--b=-2", "-0.5", "x", "-h"]) == ["--a", "--b", "-h"]


def test_help_text_is_cached_per_command(tmp_path: Path) -> None:
    counter = tmp_path / "calls"
    code = (f"open({str(counter)!r}, 'a').write('x'); "
            "print('usage: fake [-h] [--alpha A]\\n\\noptions:\\n  -h, --help  help\\n  --alpha A, --a2 A  the alpha')")
    cmd = [sys.executable, "-c", code]
    first = flags.help_text(cmd)
    second = flags.help_text(cmd)
    assert first is second and counter.read_text() == "x"
    assert flags.parse_help_flags(first) == {"-h", "--help", "--alpha", "--a2"}


def test_help_text_failure_is_a_launch_error() -> None:
    with pytest.raises(LaunchError, match="failed"):
        flags.help_text([sys.executable, "-c", "import sys; sys.exit(3)"])


def test_installed_version() -> None:
    assert flags.installed_version(sys.executable, "psutil") not in ("", "unknown")
    assert flags.installed_version(sys.executable, "surely-not-installed-pkg") == "unknown"
    assert flags.installed_version("/nonexistent/python") == "unknown"


def test_doctor_checks_profile_flags_and_database(tmp_path: Path) -> None:
    from rich.console import Console

    from sweep.profile import Profile
    from sweep.study.doctor import doctor_ok, profile_flags, render, run_doctor

    prof = Profile.model_validate({"name": "t", "server": {"extra_args": ["--cuda-graph-max-bs", "8"]},
                                   "search": {"space": {"max_running_requests": [8, 16]}}})
    assert profile_flags(prof) == ["--cuda-graph-max-bs", "8", "--max-running-requests"]
    checks = {c.name: c for c in run_doctor(prof, f"sqlite:///{tmp_path}/sub/results.db")}
    assert {"gpu", "sglang", "flags", "model", "leftovers", "port", "database"} <= set(checks)
    assert checks["database"].ok is True and checks["port"].ok is True
    bad = {c.name: c for c in run_doctor(prof, "sqlite:////proc/nope/results.db")}
    assert bad["database"].ok is False and not doctor_ok(list(bad.values()))
    console = Console(record=True, width=200)
    render(list(checks.values()), console)
    assert "database" in console.export_text()


def test_doctor_checks_searched_flags_against_the_installed_servers_own_table(help17: str, help23: str) -> None:
    from sweep.engines.flag_table import parse_help
    from sweep.profile import Profile
    from sweep.study.doctor import searched_values_problem

    prof = Profile.model_validate({"name": "t", "search": {"space": {
        "kv_cache_dtype": ["auto", "fp8_e5m2"], "cuda_graph_max_bs": [64, 256]}}})  # valid for 0.5.17 (stored)
    assert searched_values_problem(prof, parse_help(help17, "sglang", "0.5.17")) is None
    assert searched_values_problem(prof, parse_help(help23, "sglang", "0.5.23")) == \
        "search.space.cuda_graph_max_bs: cuda_graph_max_bs is not a flag of sglang 0.5.23"
    with_choice = Profile.model_validate({"name": "t", "search": {"space": {"kv_cache_dtype": ["fp8_e5m2"]}}})
    older = parse_help(help17.replace("{auto,fp8_e5m2,", "{auto,"), "sglang", "0.5.x")
    assert "is not one of its choices" in (searched_values_problem(with_choice, older) or "")
