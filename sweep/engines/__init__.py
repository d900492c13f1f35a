"""Engines: what each inference engine's server speaks (flags, paths, metric names), one Dialect per engine.

The layer above core: it imports only sweep.core. Register a new engine with `register(dialect)`; a profile
names it in server.engine and everything (launcher, drivers, probes, report) reads it from there.
"""

from __future__ import annotations

from sweep.engines.base import Dialect, MetricNames, Paths, dashed_flags, flags_in_argv
from sweep.engines.sglang import SGLANG

DEFAULT_ENGINE = "sglang"

_REGISTRY: dict[str, Dialect] = {}


def register(dialect: Dialect) -> Dialect:
    """Make `dialect` available under its name (a second registration of a name replaces the first)."""
    _REGISTRY[dialect.name] = dialect
    return dialect


def unregister(name: str) -> None:
    """Forget an engine (tests that register a throwaway one); the default engine stays."""
    if name != DEFAULT_ENGINE:
        _REGISTRY.pop(name, None)


def names() -> tuple[str, ...]:
    """The registered engine names, sorted."""
    return tuple(sorted(_REGISTRY))


def get(name: str = DEFAULT_ENGINE) -> Dialect:
    """The dialect registered under `name`; KeyError naming the known engines otherwise."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown engine {name!r} (known: {', '.join(names())})") from None


def default() -> Dialect:
    """The default engine's dialect (SGLang)."""
    return _REGISTRY[DEFAULT_ENGINE]


register(SGLANG)

__all__ = ["DEFAULT_ENGINE", "SGLANG", "Dialect", "MetricNames", "Paths", "dashed_flags", "default",
           "flags_in_argv", "get", "names", "register", "unregister"]
