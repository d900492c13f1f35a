"""The engine flags a study sets alike on every launch, and how two studies' differ (`sweep compare`, `history`).

A study's fixed flags: its server.extra_args (each flag with its value, "" for a switch) and every flag of its
search.space beyond the five knobs that has one value (a flag fixed through the space is the same fact as one in
extra_args). Two windows measured with different fixed flags (fp8 KV against bf16, another attention backend)
measure different servers: compare and history refuse them unless --force. The five knobs are compared apart.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from sweep.core.types import JSON, KNOB_NAMES

_NUMBER = re.compile(r"-\d[\d.eE+-]*")


def fixed_flags_of(profile_raw: Mapping[str, JSON]) -> dict[str, str]:
    """option -> value of every flag the study fixes (from its stored profile), by its dashed option."""
    out: dict[str, str] = {}
    server = profile_raw.get("server")
    listed = server.get("extra_args") if isinstance(server, dict) else None
    args = [str(a) for a in listed] if isinstance(listed, list) else []
    i = 0
    while i < len(args):
        tok = args[i]
        if tok.startswith("--"):
            name, eq, val = tok.partition("=")
            nxt = args[i + 1] if i + 1 < len(args) else None
            if not eq and nxt is not None and (not nxt.startswith("-") or _NUMBER.fullmatch(nxt)):
                val, i = nxt, i + 1
            out[name] = val
        i += 1
    search = profile_raw.get("search")
    space = search.get("space") if isinstance(search, dict) else None
    for name, dim in (space.items() if isinstance(space, dict) else ()):
        if name not in KNOB_NAMES and isinstance(dim, list) and len(dim) == 1:
            value = dim[0]
            if value is False:
                continue  # a switch left off is no flag on the command line
            out["--" + name.replace("_", "-")] = "" if value is True else str(value)
    return out


def of_profile_json(text: str | None) -> dict[str, str]:
    """fixed_flags_of a stored profile_json (another version's that does not parse: none)."""
    try:
        raw = json.loads(text or "{}")
    except ValueError:
        return {}
    return fixed_flags_of(raw) if isinstance(raw, dict) else {}


def differences(a: Mapping[str, str], b: Mapping[str, str]) -> list[str]:
    """Each flag the two sets disagree on, e.g. "--kv-cache-dtype fp8_e5m2 vs not set"."""
    def shown(flags: Mapping[str, str], k: str) -> str:
        return "not set" if k not in flags else (flags[k] or "on")
    return [f"{k} {shown(a, k)} vs {shown(b, k)}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
