"""The files sweep ships: its profiles and its model shape folders, found in a checkout and in an installed wheel.

In the repository they live at profiles/ and models/ (what the Makefile, the tests and the docs name);
sweep/bundled/profiles and sweep/bundled/models are links to them, and the wheel carries their files as package
data there (pyproject.toml), so an installed `sweep` finds them wherever it runs.
"""

from __future__ import annotations

from pathlib import Path

BUNDLED = Path(__file__).resolve().parents[1] / "bundled"
PROFILES = BUNDLED / "profiles"  # interactive.yaml, smoke.yaml, ...
REPO = Path(__file__).resolve().parents[2]  # the checkout's root (site-packages in an installed wheel)


def bundled_profiles() -> list[str]:
    """Names of the profiles sweep ships (`--profile NAME`, `sweep init NAME`)."""
    return sorted(p.stem for p in PROFILES.glob("*.yaml"))


def model_folder(model_path: str) -> Path | None:
    """The local folder a profile's server.model_path names: absolute as given; relative, in the checkout, then
    among the shipped folders (`models/NAME`), then the working directory; None when no such folder exists (a hub
    name SGLang downloads)."""
    p = Path(model_path).expanduser()
    tried = [p] if p.is_absolute() else [REPO / p, BUNDLED / p, Path.cwd() / p]
    return next((t for t in tried if t.is_dir()), None)


def model_argument(model_path: str) -> str:
    """server.model_path as given to the server's --model-path: the local folder where one exists, else as given."""
    folder = model_folder(model_path)
    return str(folder) if folder is not None else model_path
