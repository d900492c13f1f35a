"""The docs point only at files that are in the repository: every relative link and every backticked repository
path of a tracked Markdown file exists, none reaches outside the checkout, and no doc or tool default names a
folder of one machine."""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The repository's own folders: a backticked path that starts with one of them names a file of the checkout.
TREES = ("sweep", "launchers", "sglang_sim", "tests", "tools", "docs", "bench", "profiles", "models", "scripts",
         ".ci")
SKIP = {"reports", "build", "node_modules"}  # and every hidden folder but .ci (.venv, .git, caches, bundles)
# Files a doc tells the reader to make, not files it says are here.
MADE_BY_THE_READER = {"profiles/mine.yaml"}
MACHINE_ONLY = ("../shared", "/work/", "/home/")
LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\n]+)`|```[^\n]*\n(.*?)```", re.S)
PATHLIKE = re.compile(r"^[\w.\-/*]+$")


def _tracked(suffixes: tuple[str, ...]) -> list[Path]:
    """The checkout's own files of these kinds (and Makefiles), without the virtual environment, caches and
    outputs."""
    found = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP and (not d.startswith(".") or d == ".ci")
                   and not d.endswith(".egg-info")]
        found += [Path(folder) / f for f in files if f.endswith(suffixes) or f == "Makefile"]
    return sorted(found)


def _docs() -> list[Path]:
    return _tracked((".md",))


def _exists(doc: Path, target: str) -> bool:
    """target relative to the doc's folder or the repository root, inside the checkout; a glob matches a file."""
    for base in (doc.parent, ROOT):
        if any(ch in target for ch in "*?["):
            if any(m.resolve().is_relative_to(ROOT) for m in base.glob(target)):
                return True
        elif (base / target).exists() and (base / target).resolve().is_relative_to(ROOT):
            return True
    return False


def _code_paths(text: str) -> set[str]:
    """Words of inline code and code blocks that name a path in the repository's folders (or climb out of it)."""
    out = set()
    for inline, block in CODE.findall(text):
        for word in (inline or block).split():
            word = word.strip("\"'(),;:[]{}")
            word = word.split("=", 1)[1] if "=" in word else word  # PROFILE=profiles/x.yaml, --out=docs/x
            if not PATHLIKE.match(word) or "/" not in word:
                continue
            if word.startswith("../") or word.split("/", 1)[0] in TREES:
                out.add(word.rstrip("."))
    return out


def test_the_scan_sees_the_readme_and_the_docs() -> None:
    names = {str(d.relative_to(ROOT)) for d in _docs()}
    assert {"README.md", "docs/profile.md", "docs/calibration.md", "tools/sglang-h200/README.md"} <= names
    assert "sweep/profile/" in _code_paths((ROOT / "README.md").read_text())


def test_every_relative_link_of_a_doc_exists() -> None:
    broken = []
    for doc in _docs():
        for target in LINK.findall(doc.read_text()):
            path = target.split("#", 1)[0]
            if "://" in target or target.startswith(("#", "mailto:")) or not path:
                continue
            if not _exists(doc, path):
                broken.append(f"{doc.relative_to(ROOT)}: ({target})")
    assert not broken, f"links to files that are not in the repository: {broken}"


def test_every_backticked_repository_path_of_a_doc_exists() -> None:
    missing = []
    for doc in _docs():
        for word in sorted(_code_paths(doc.read_text())):
            if word not in MADE_BY_THE_READER and not _exists(doc, word):
                missing.append(f"{doc.relative_to(ROOT)}: `{word}`")
    assert not missing, f"paths named in the docs that are not in the repository: {missing}"


def test_no_doc_or_tool_names_a_folder_of_one_machine() -> None:
    here = Path(__file__).resolve()
    found = [f"{p.relative_to(ROOT)}: {needle}" for p in _tracked((".md", ".py", ".sh", ".yaml", ".toml", ".txt"))
             if p != here for needle in MACHINE_ONLY if needle in p.read_text(errors="replace")]
    assert not found, f"machine-specific paths (use the repository's own copies or a path relative to it): {found}"


def test_every_named_top_level_doc_exists() -> None:
    """DESIGN.md, DIGEST.md and the like: a doc or docstring that names one means a file at the root."""
    named = {(p.relative_to(ROOT), name) for p in _tracked((".md", ".py")) if p != Path(__file__).resolve()
             for name in re.findall(r"\b([A-Z][A-Z_]+\.md)\b", p.read_text(errors="replace"))}
    gone = sorted(f"{p}: {name}" for p, name in named
                  if not (ROOT / name).exists() and not (ROOT / p).with_name(name).exists())
    assert not gone, f"names of docs that are not in the repository: {gone}"


def test_the_readme_says_where_the_sweep_command_is_before_it_uses_it() -> None:
    """A bare `sweep ...` is "command not found" outside the virtual environment: the README says so first."""
    text = (ROOT / "README.md").read_text()
    first_use = min(m.start() for m in re.finditer(r"(`|^)sweep [a-z]", text, re.M))
    assert ".venv/bin/sweep" in text[:first_use], text[first_use - 200:first_use + 40]
    assert (ROOT / "pyproject.toml").read_text().count('sweep = "sweep.cli:main"') == 1
