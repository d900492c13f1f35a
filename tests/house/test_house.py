"""The house keeps its plan: layers enforced by import-linter (pyproject.toml), no import cycles, a face per
folder. A deliberate upward import makes `lint-imports` fail, so `make lint` (and CI) would."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")
LAYER_FOLDERS = ("core", "engines", "profile", "analysis", "workload", "launchers", "store", "drivers", "views", "ladder",
                 "report", "study", "ui", "fleet", "cli")


def _lint(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LINT), "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"})


def test_the_layer_contracts_hold() -> None:
    proc = _lint(ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "BROKEN" not in proc.stdout


def _copy(tmp_path: Path) -> Path:
    for part in ("sweep", "sglang_sim"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _append(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text((path.read_text() if path.exists() else "") + text)


def test_an_upward_import_breaks_the_layers(tmp_path: Path) -> None:
    """core importing the CLI (the top floor) is refused, with the import named."""
    copy = _copy(tmp_path)
    _append(copy / "sweep/core/errors.py", "\nfrom sweep.cli import app  # noqa: E402 - deliberately upward\n")
    proc = _lint(copy)
    assert proc.returncode != 0
    assert "BROKEN" in proc.stdout and "sweep.core.errors -> sweep.cli" in proc.stdout


def _old_path(copy: Path) -> None:
    """An old module path answered by an import finder (sweep/_compat.py answered 58): core loads the CLI through
    `sweep.cli_workers`, a module no file holds, which the lint sees as an import of the package `sweep`."""
    _append(copy / "sweep/core/errors.py", "\nimport sweep.cli_workers  # noqa: E402,F401\n")


def _top_level_package(copy: Path) -> None:
    """A package beside sweep (the 0.1 `launchers/`) that re-exports a layer: invisible to the layers."""
    _append(copy / "launchers/__init__.py", "from sweep.cli import app  # noqa: F401\n")
    _append(copy / "sweep/core/errors.py", "\nimport launchers  # noqa: E402,F401\n")


def _lazy_face(copy: Path) -> None:
    """A face's map names its modules in strings; its TYPE_CHECKING mirror (kept equal to the map by
    test_a_lazy_face_is_mirrored_for_the_type_checker) is what the lint sees: the store lending the CLI's app."""
    init = copy / "sweep/store/__init__.py"
    text = init.read_text().replace('__getattr__, __dir__, __all__ = lazy(__name__, {',
                                    '__getattr__, __dir__, __all__ = lazy(__name__, {\n    "sweep.cli.app": ("app",),')
    init.write_text(text.replace("if TYPE_CHECKING:", "if TYPE_CHECKING:\n    from sweep.cli.app import app as app"))


def _unplaced_floor(copy: Path) -> None:
    """A folder of sweep/ missing from the layers' list: before `exhaustive`, its imports were never judged."""
    _append(copy / "sweep/extra/__init__.py", '"""A floor nobody placed."""\n\nfrom sweep.cli import app  # noqa: F401\n')


@pytest.mark.parametrize(("door", "reported"), [
    (_old_path, "sweep.core.errors -> sweep (l."),
    (_top_level_package, "sweep.core.errors -> launchers (l."),
    (_lazy_face, "sweep.store -> sweep.cli.app (l."),
    (_unplaced_floor, "sweep.extra"),
], ids=["old-path", "top-level-package", "lazy-face", "unplaced-floor"])
def test_a_side_door_breaks_a_contract(tmp_path: Path, door: Callable[[Path], None], reported: str) -> None:
    """Each way a module once reached a layer above it unseen by `lint-imports` (issue 32) now breaks a contract."""
    copy = _copy(tmp_path)
    door(copy)
    proc = _lint(copy)
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert "BROKEN" in proc.stdout and reported in proc.stdout, proc.stdout[-3000:] + proc.stderr[-2000:]


def _cycles(graph: grimp.ImportGraph) -> list[str]:
    out = []
    for mod in sorted(graph.modules):
        for dep in graph.find_modules_directly_imported_by(mod):
            if dep != mod and graph.chain_exists(importer=dep, imported=mod):
                out.append(f"{mod} -> {dep} -> ... -> {mod}")
    return out


PACKAGES = ("sweep", "sglang_sim", "bench")  # the packages of the checkout; tools/ holds scripts (below)


def test_no_import_cycles() -> None:
    """No module reaches itself through imports, function-local imports and the imports made only for type checking
    included (so none hides a cycle). The simulator's two type-only pairs (engine <-> schedule_policy, server <->
    openai_api) became protocols: `schedule_policy.SchedulerState`, `stream.ApiHost`."""
    assert not _cycles(grimp.build_graph(*PACKAGES, exclude_type_checking_imports=False, cache_dir=None))


def _script_imports(folder: Path) -> dict[str, set[str]]:
    """tools/'s scripts import each other by file name (the folder on sys.path): script -> the scripts it imports,
    anywhere in its body (a function-local import included), imports under `if TYPE_CHECKING:` apart."""
    names = {p.stem for p in folder.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in folder.rglob("*.py"):
        tree = ast.parse(path.read_text())
        typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                       and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
                       for stmt in node.body for n in ast.walk(stmt)}
        deps = graph.setdefault(path.stem, set())
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.Import):
                deps |= {a.name.split(".")[0] for a in node.names} & names
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                deps |= {node.module.split(".")[0]} & names
        deps.discard(path.stem)
    return graph


def _script_cycles(graph: dict[str, set[str]]) -> list[str]:
    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            node = todo.pop()
            if node == goal:
                return True
            if node not in seen:
                seen.add(node)
                todo.extend(graph.get(node, ()))
        return False

    return [f"{a} -> {b} -> ... -> {a}" for a in sorted(graph) for b in sorted(graph[a]) if reaches(b, a)]


def test_no_import_cycles_among_the_tools() -> None:
    """tools/ at run time: `calibrate` and `calibration_holdout` imported each other (a function-local import hid
    it); the replay of the held-out windows now lives in calibration_replay, which imports both."""
    graph = _script_imports(ROOT / "tools")
    assert "calibration_holdout" in graph["calibrate"]  # the check reads the real imports
    assert _script_cycles(graph) == []
    assert _script_cycles({**graph, "calibration_holdout": {"calibrate"}}) != []  # and would see the old one


FACES = ("store",)  # the folders whose __init__.py lends names (lazily, sweep/core/face.py); the others lend none


def _face_map(tree: ast.Module) -> dict[str, set[str]] | None:
    """The map `lazy(__name__, {module: names})` of a face, or None for a folder that lends nothing lazily."""
    for node in tree.body:
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name) and node.value.func.id == "lazy"):
            return {k: set(v) for k, v in ast.literal_eval(node.value.args[1]).items()}
    return None


def _mirror(tree: ast.Module) -> dict[str, set[str]]:
    """The `if TYPE_CHECKING:` block of a face: `from module import name as name` lines, as a map."""
    out: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.module, ast.unparse(imp)
                for alias in imp.names:
                    assert alias.asname == alias.name, f"{ast.unparse(imp)}: re-export as the same name"
                    out.setdefault(imp.module, set()).add(alias.name)
    return out


def test_every_layer_folder_says_what_it_holds() -> None:
    """Each folder's __init__.py has a docstring; one that names public names in __all__ holds each of them."""
    for folder in LAYER_FOLDERS:
        init = ROOT / "sweep" / folder / "__init__.py"
        assert ast.get_docstring(ast.parse(init.read_text())), f"{init.relative_to(ROOT)} says nothing"
        mod = __import__(f"sweep.{folder}", fromlist=["__all__"])
        for name in getattr(mod, "__all__", ()):
            assert hasattr(mod, name), f"sweep.{folder}.__all__ names {name}, which it does not hold"


def test_a_lazy_face_is_mirrored_for_the_type_checker() -> None:
    """A face resolves its names through strings, which mypy and import-linter cannot follow; so each face holds
    an `if TYPE_CHECKING:` block importing exactly the names its map lends, from the same modules (mypy types them,
    import-linter sees the arrows). Only the folders of FACES keep a face."""
    faces = []
    for init in sorted((ROOT / "sweep").glob("*/__init__.py")):
        tree = ast.parse(init.read_text())
        lent = _face_map(tree)
        if lent is None:
            continue
        faces.append(init.parent.name)
        assert _mirror(tree) == lent, f"{init.relative_to(ROOT)}: its TYPE_CHECKING block is not its map"
    assert tuple(faces) == FACES


def test_the_type_checker_sees_a_face_s_real_types(tmp_path: Path) -> None:
    """`x: int = open_reader(...)` through the store's face is a type error (a face typed Any would let it pass)."""
    snippet = tmp_path / "snippet.py"
    snippet.write_text('from sweep.store import open_reader\n\nx: int = open_reader("sqlite:///nope.db")\n')
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("mypy")), "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(tmp_path / "cache"), "--follow-imports=silent", str(snippet)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, env={"MYPYPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert 'snippet.py:3: error: Incompatible types in assignment (expression has type "RunsReader"' in proc.stdout


def test_a_module_of_a_folder_imports_none_of_its_siblings() -> None:
    """Importing one module of a folder imports none of its siblings (the folders lend nothing; the store's face is
    lazy): the study plan, which the terminal's bars read, does not bring the read model, the store or Alembic with
    it; `sweep --help` stays as quick as before the folders."""
    code = ("import sys, sweep.views.plan, sweep.ui.progress, sweep.store.records; "
            "print(sorted(m for m in ('sweep.views.read_model', 'sweep.store.database', 'sqlalchemy', 'alembic', "
            "'sweep.ui.live') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
    from sweep.store import Store  # the face lends it, on first use

    assert Store.__module__ == "sweep.store.database"


def test_the_top_level_holds_only_folders() -> None:
    """sweep/ is folders and a docstring: no flat module, and no import finder answering old paths."""
    flat = sorted(p.name for p in (ROOT / "sweep").glob("*.py") if p.name != "__init__.py")
    assert flat == []


# tests/ mirrors the package (issue 32 §4): a folder per floor of sweep/ (import-linter's layers contract), and these
# beside them; tests/data and tests/fixtures hold what the tests read.
TEST_FOLDERS_BESIDE_THE_FLOORS = {"sim": "sglang_sim/", "bench": "bench/", "tools": "tools/",
                                  "house": "the checkout's own rules: layers, docs, README, scripts, wheel",
                                  "faults": "the fault matrix: real sweep processes killed at every phase"}
TEST_DATA_FOLDERS = ("data", "fixtures")


def _floors() -> set[str]:
    """The folders of sweep/ that pyproject's layers contract places, `a | b` floors split."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["type"] == "layers" and c.get("containers") == ["sweep"])["layers"]
    return {name.strip() for floor in layers for name in floor.split("|")}


def test_the_tests_mirror_the_package() -> None:
    """Every test file is tests/<folder>/test_x.py, the folder a floor of sweep/ or one of
    TEST_FOLDERS_BESIDE_THE_FLOORS; every floor has its folder; and each folder but faults/ is a package (tests is
    one too), so two test files of one name in two folders are two modules under pytest's default import mode."""
    tests = ROOT / "tests"
    allowed = _floors() | set(TEST_FOLDERS_BESIDE_THE_FLOORS)
    misplaced = sorted(str(p.relative_to(tests)) for p in tests.rglob("test_*.py")
                       if len(p.relative_to(tests).parts) != 2 or p.parent.name not in allowed)
    assert misplaced == [], f"test files outside tests/<folder>/, the folder one of {sorted(allowed)}: {misplaced}"
    folders = {p.name for p in tests.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))}
    assert sorted(folders - allowed - set(TEST_DATA_FOLDERS)) == [], "folders of tests/ that name no floor"
    assert sorted(_floors() - folders) == [], "floors of sweep/ without their folder in tests/"
    not_packages = sorted(f for f in (folders & allowed) - {"faults"} if not (tests / f / "__init__.py").is_file())
    assert (tests / "__init__.py").is_file() and not_packages == [], f"not packages: {not_packages}"


def test_an_old_module_path_is_gone() -> None:
    """The 0.1 paths (`sweep.knee`, `launchers.procs`) no longer import: nothing answers them behind the lint's
    back."""
    import importlib

    for old in ("sweep.knee", "sweep.cli_workers", "launchers.procs"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(old)


def test_the_pre_commit_hooks_run_make_lint_s_tools() -> None:
    """The Makefile says the pre-commit hooks run the same checks as `make lint`: each tool `lint:` runs (ruff,
    lint-imports, mypy) is a hook's entry."""
    import re

    import yaml

    make = (ROOT / "Makefile").read_text()
    recipe = make[make.index("\nlint:"):].split("\n\n")[0]
    tools = set(re.findall(r"\$\(VENV\)/bin/([\w-]+)", recipe))
    hooks = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())["repos"][0]["hooks"]
    entries = " ".join(h["entry"] for h in hooks)
    assert tools == {"ruff", "lint-imports", "mypy"}
    assert {t for t in tools if f".venv/bin/{t} " not in entries} == set()


def test_the_wheel_ships_sweep_and_its_simulator_only() -> None:
    """pyproject's package discovery finds sweep and sglang_sim (which sweep imports at run time), nothing else of
    the checkout (no launchers/, bench/, tools/ or tests/ in site-packages)."""
    import tomllib

    from setuptools import find_packages

    found = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    tops = {p.split(".")[0] for p in find_packages(str(ROOT), include=found["include"])}
    assert tops == {"sweep", "sglang_sim"}


# Issue 32 §3, types at the edges: ceilings that fail when untyped mappings, ignores or stat columns read by a built
# name creep back (lower a ceiling when a change brings its count down; raising one needs a reason in review).
OPEN_MAPPINGS_CEILING = 32  # `Mapping[str, object]` / `dict[str, object]` in sweep/: rows by column name at the SQL
# boundary, update values, partial reference rows, JSON documents going out; fixed shapes are records or TypedDicts
TYPE_IGNORE_CEILING = 0


def _count(pattern: str, *folders: str) -> list[str]:
    import re

    hits = []
    for folder in folders or ("sweep",):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if re.search(pattern, line):
                    hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    return hits


def test_untyped_mappings_and_type_ignores_do_not_creep_back() -> None:
    mappings = _count(r"Mapping\[str, object\]|dict\[str, object\]")
    assert len(mappings) <= OPEN_MAPPINGS_CEILING, (
        f"{len(mappings)} open mappings in sweep/ (ceiling {OPEN_MAPPINGS_CEILING}): give a fixed shape a record or a "
        "TypedDict\n" + "\n".join(mappings))
    ignores = _count(r"type:\s*ignore")
    assert len(ignores) <= TYPE_IGNORE_CEILING, "a `# type: ignore` in sweep/:\n" + "\n".join(ignores)


def test_the_read_side_reads_stat_fields_not_built_column_names() -> None:
    """A stat read by a name built at run time (f"ttft_p{q}_ms", getattr) prints "—" for a misspelt name; the report,
    the views, the terminal and the CLI read RunStats' fields (RunStats.percentile_ms for the SLA's percentile)."""
    built = _count(r"_p\{|\.number\(|getattr\(stats", "sweep/report", "sweep/views", "sweep/ui", "sweep/cli")
    assert not built, "stat columns read by a built name:\n" + "\n".join(built)
