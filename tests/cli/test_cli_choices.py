"""Every option with a fixed set of values takes only those: a typo exits 2 naming the valid ones, and writes
nothing (it once ran the HTTP driver and stored "htp", took `sglng` as sglang, or listed nothing with exit 0)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweep.cli import main

ROOT = Path(__file__).resolve().parents[2]
SMOKE = str(ROOT / "profiles" / "smoke.yaml")

# (argv before the database option, the option, its typo, the valid values the error must name)
CASES = [
    (["knee", "-p", SMOKE], "--driver", "htp", ["auto", "http", "virtual"]),
    (["knee", "-p", SMOKE], "--launcher", "sglng", ["auto", "sglang", "sim", "attach"]),
    (["sweep", "-p", SMOKE], "--driver", "virtal", ["auto", "http", "virtual"]),
    (["ladder", "-p", SMOKE], "--driver", "htp", ["auto", "http", "virtual"]),
    (["ladder", "-p", SMOKE], "--launcher", "simm", ["auto", "sglang", "sim", "attach"]),
    (["crosscheck", "-p", SMOKE], "--driver", "virtual", ["auto", "http"]),
    (["crosscheck", "-p", SMOKE], "--launcher", "atach", ["auto", "sglang", "sim", "attach"]),
    (["crosscheck", "-p", SMOKE], "--reference", "h2", ["auto", "h11", "bench_serving"]),
    (["worker", "--study", "s"], "--driver", "htp", ["auto", "http", "virtual"]),
    (["worker", "--study", "s"], "--launcher", "sglng", ["auto", "sglang", "sim", "attach"]),
    (["study", "create", "-p", SMOKE, "--study", "s"], "--driver", "htp", ["auto", "http", "virtual"]),
    (["study", "create", "-p", SMOKE, "--study", "s"], "--launcher", "sglng", ["auto", "sglang", "sim", "attach"]),
    (["study", "workers", "--study", "s"], "--format", "xml", ["table", "json", "csv"]),
    (["runs"], "--status", "complete", ["running", "completed", "failed", "aborted"]),
    (["runs"], "--format", "yaml", ["table", "json", "csv"]),
    (["show", "1"], "--format", "csv", ["table", "json"]),
]


@pytest.mark.parametrize(("argv", "option", "typo", "valid"), CASES,
                         ids=[f"{c[0][0]}{'-' + c[0][1] if c[0][0] == 'study' else ''}{c[1]}" for c in CASES])
def test_a_typo_in_a_fixed_choice_exits_2_naming_the_choices(argv: list[str], option: str, typo: str,
                                                              valid: list[str], tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "r.db"
    rc = main([*argv, "--db", str(db), option, typo])
    err = " ".join(capsys.readouterr().err.replace("│", " ").split())  # typer's error box, unwrapped
    assert rc == 2, err
    expected = "'" + "', '".join(valid) + "'"
    assert f"Invalid value for '{option}'" in err and f"{typo!r} is not one of {expected}" in err, err
    assert list(tmp_path.iterdir()) == []  # nothing written: no database, no reports
