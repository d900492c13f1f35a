"""The house keeps its plan: layers enforced by import-linter (pyproject.toml), no import cycles, a face per
folder. A deliberate upward import makes `lint-imports` fail, so `make lint` (and CI) would."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")
LAYER_FOLDERS = ("core", "engines", "profile", "analysis", "workload", "launchers", "store", "drivers", "views", "report",
                 "study", "ui", "fleet", "cli")


def _lint(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LINT), "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"})


def test_the_layer_contracts_hold() -> None:
    proc = _lint(ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "BROKEN" not in proc.stdout


def test_an_upward_import_breaks_the_layers(tmp_path: Path) -> None:
    """core importing the CLI (the top floor) is refused, with the import named."""
    for part in ("sweep", "sglang_sim"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    errors = tmp_path / "sweep" / "core" / "errors.py"
    errors.write_text(errors.read_text() + "\nfrom sweep.cli import app  # noqa: E402 - deliberately upward\n")
    proc = _lint(tmp_path)
    assert proc.returncode != 0
    assert "BROKEN" in proc.stdout and "sweep.core.errors -> sweep.cli" in proc.stdout


def _cycles(graph: grimp.ImportGraph) -> list[str]:
    out = []
    for mod in sorted(graph.modules):
        for dep in graph.find_modules_directly_imported_by(mod):
            if dep != mod and graph.chain_exists(importer=dep, imported=mod):
                out.append(f"{mod} -> {dep} -> ... -> {mod}")
    return out


def test_no_import_cycles() -> None:
    """No module reaches itself through imports, function-local imports included (so none hides a cycle). Counting
    the imports made only for type checking too, the one exception is inside sglang_sim (two type-only pairs)."""
    assert not _cycles(grimp.build_graph("sweep", "sglang_sim", exclude_type_checking_imports=True, cache_dir=None))
    typed = _cycles(grimp.build_graph("sweep", "sglang_sim", exclude_type_checking_imports=False, cache_dir=None))
    assert [c for c in typed if not c.startswith("sglang_sim.")] == []


def test_every_layer_folder_has_a_face_with_all() -> None:
    """Each folder's __init__.py names its public names in __all__, and each of them resolves."""
    for folder in LAYER_FOLDERS:
        init = ROOT / "sweep" / folder / "__init__.py"
        tree = ast.parse(init.read_text())
        names = [n for n in tree.body if isinstance(n, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__"
            or isinstance(t, ast.Tuple) and any(isinstance(e, ast.Name) and e.id == "__all__" for e in t.elts)
            for t in n.targets)]
        assert names, f"{init.relative_to(ROOT)} has no __all__"
        assert ast.get_docstring(tree), f"{init.relative_to(ROOT)} says nothing of what the folder holds"
        mod = __import__(f"sweep.{folder}", fromlist=["__all__"])
        for name in mod.__all__:
            assert hasattr(mod, name), f"sweep.{folder}.__all__ names {name}, which it does not hold"


def test_a_module_of_a_folder_imports_none_of_its_siblings() -> None:
    """Faces are lazy (sweep/core/face.py): the study plan, which the terminal's bars read, does not bring the read
    model, the store or Alembic with it; `sweep --help` stays as quick as before the folders."""
    code = ("import sys, sweep.views.plan, sweep.ui.progress; "
            "print(sorted(m for m in ('sweep.views.read_model', 'sweep.store', 'alembic', 'sweep.ui.live') "
            "if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
    from sweep.views import read_study  # the face still lends it, on first use

    assert callable(read_study)


def test_the_top_level_holds_only_folders() -> None:
    """sweep/ is folders and a docstring: no flat module, and no import finder answering old paths."""
    flat = sorted(p.name for p in (ROOT / "sweep").glob("*.py") if p.name != "__init__.py")
    assert flat == []


def test_an_old_module_path_is_gone() -> None:
    """The 0.1 paths (`sweep.knee`, `launchers.procs`) no longer import: nothing answers them behind the lint's
    back."""
    import importlib

    for old in ("sweep.knee", "sweep.cli_workers", "launchers.procs"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(old)
