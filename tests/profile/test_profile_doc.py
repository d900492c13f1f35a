"""docs/profile.md is generated from the profile models and current; every field has a meaning."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

from pydantic import BaseModel

from sweep import profile as P
from sweep.profile.doc import models, reference

ROOT = Path(__file__).resolve().parents[2]


def test_the_checked_in_reference_is_current() -> None:
    assert (ROOT / "docs" / "profile.md").read_text() == reference(), \
        "docs/profile.md is out of date: run `.venv/bin/sweep profile-schema` and commit it"


def test_every_profile_model_and_field_is_documented() -> None:
    defined = {c for c in vars(P).values() if inspect.isclass(c) and issubclass(c, BaseModel)
               and c.__module__ == P.__name__ and not c.__name__.startswith("_")}
    assert defined <= set(models()), f"not in docs/profile.md: {defined - set(models())}"
    undocumented = [f"{m.__name__}.{name}" for m in defined for name, info in m.model_fields.items()
                    if not (info.description or "").strip()]
    assert not undocumented, f"fields without a description: {undocumented}"


def test_sweep_profile_schema_writes_the_reference(tmp_path: Path) -> None:
    out = tmp_path / "profile.md"
    proc = subprocess.run([sys.executable, "-m", "sweep.cli", "profile-schema", "--out", str(out)],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert out.read_text() == reference()
    assert "| `measure_seconds` | float | `900.0` |" in out.read_text()


def test_the_readme_own_model_profile_loads_as_written(tmp_path: Path) -> None:
    """README's "Your own model" example is a valid profile: a real model folder, no random weights."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Your own model"):]
    body = section[section.index("```yaml\n") + len("```yaml\n"):section.index("```\n", section.index("```yaml"))]
    first, _, rest = body.partition("\n")
    assert first == "# profiles/mine.yaml", first
    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "mine.yaml").write_text(rest)
    (folder / "prompts.jsonl").write_text('{"prompt": "hello"}\n')  # "beside this file", as the comment says
    prof = P.load_profile(folder / "mine.yaml")
    assert prof.server.launcher == "sglang" and Path(prof.server.model_path).is_absolute()
    assert "--load-format" not in prof.server.extra_args
    assert prof.workload.dataset is not None and prof.workload.dataset.file == folder / "prompts.jsonl"
