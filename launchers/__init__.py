"""Old home of the launchers, kept for one release: they live in sweep.launchers now (sweep/_compat.py)."""

import sweep  # noqa: F401  (installs the old-path finder)
