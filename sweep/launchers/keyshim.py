"""Start a server module with its API key taken from the environment, so the key is in no process's argv.

Anyone on the host can read argv (`ps`, /proc/PID/cmdline); the environment only the same user and root.
SGLang reads the key from `--api-key` only, so the child runs `python -c SHIM MODULE ARGS...`: the shim
moves the key from the environment into its own sys.argv and runs the module as `python -m` would.
"""

from __future__ import annotations

from collections.abc import Sequence

import httpx

KEY_ENV = "SWEEP_SERVER_API_KEY"
# Set for a `server.command` wrapper: it starts the server with `python3 -c "$SWEEP_SERVER_SHIM" MODULE "$@"`.
SHIM_ENV = "SWEEP_SERVER_SHIM"
PLACEHOLDER = "***"  # the key's place in the command people are shown

# Self-contained: it runs on the server's interpreter, where nothing of sweep is importable. The variable is
# dropped before the module runs, so the server's own subprocesses never inherit it.
SHIM = (
    "import os, runpy, sys\n"
    f"key = os.environ.pop({KEY_ENV!r}, None)\n"
    f"os.environ.pop({SHIM_ENV!r}, None)\n"
    "module = sys.argv.pop(1)\n"
    "if key:\n"
    "    sys.argv += ['--api-key', key]\n"
    "runpy.run_module(module, run_name='__main__', alter_sys=True)\n"
)


def command(python: str, module: str) -> list[str]:
    """The argv that starts `module` through the shim (the key comes from KEY_ENV)."""
    return [python, "-c", SHIM, module]


def child_env(api_key: str) -> dict[str, str]:
    """What to add to the child's environment: the key, and the shim for a wrapper to start the server with."""
    return {KEY_ENV: api_key, SHIM_ENV: SHIM}


def readable(argv: Sequence[str]) -> list[str]:
    """argv with the shim written as the `python -m MODULE` it stands for."""
    out = list(argv)
    if len(out) >= 4 and out[1:3] == ["-c", SHIM]:
        out[1:4] = ["-m", out[3]]
    return out


def scrub(text: str) -> str:
    """`text` (a command line, a log's tail) with the shim's code taken out: `python -c SHIM MODULE` becomes
    `python -m MODULE`, and a line quoting the shim (a traceback's) is dropped; its code never reaches a person."""
    text = text.replace(f"-c {SHIM} ", "-m ").replace(f"-c {SHIM}", "-m ").replace(SHIM, "")
    own = {ln.strip() for ln in SHIM.splitlines()}
    return "\n".join(ln for ln in text.split("\n") if not ln.strip() or ln.strip() not in own)


def shown(argv: Sequence[str]) -> list[str]:
    """The command people are shown and stored: runnable as `python -m MODULE ...`, the key a placeholder."""
    return [*readable(argv), "--api-key", PLACEHOLDER]


def refuses_without_key(url: str) -> bool | None:
    """Whether the server answers 401 to a request without the key; None if it cannot be told (no answer).

    A `server.command` wrapper that does not start the server through the shim leaves it without a key."""
    for _ in range(2):  # one retry on a fresh connection
        try:
            return httpx.get(f"{url}/v1/models", timeout=10.0).status_code == 401
        except httpx.HTTPError:
            continue
    return None
