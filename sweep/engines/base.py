"""What an inference engine's server speaks, as sweep uses it: the Dialect and its parts (paths, metric names).

Everything engine-specific outside the launcher's process handling lives in one Dialect value: how a knob
becomes a flag, which flags sweep sets itself, the ready line in the log, the HTTP paths, the /metrics prefix and
aliases, the package whose version is recorded and the module that starts the server. A second engine is one
more Dialect (sweep/engines/<name>.py) and one `register` line in sweep/engines/__init__.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sweep.core.types import KNOB_NAMES, ServerConfig


def flags_in_argv(argv: Iterable[str]) -> list[str]:
    """The option names in an argv fragment (values such as `-1` or `0.8` are skipped)."""
    out: list[str] = []
    for tok in argv:
        if not tok.startswith("-") or tok in ("-", "--"):
            continue
        if re.fullmatch(r"-\d[\d.eE+-]*", tok):  # a negative number is a value, e.g. --chunked-prefill-size -1
            continue
        out.append(tok.split("=", 1)[0])
    return out


def dashed_flags(knobs: Iterable[str] = KNOB_NAMES) -> dict[str, str]:
    """knob -> `--knob-with-dashes`, the argparse spelling most engines use for a knob's flag."""
    return {k: "--" + k.replace("_", "-") for k in knobs}


@dataclass(frozen=True)
class Paths:
    """The server's HTTP paths sweep calls (each begins with "/")."""

    generate: str  # the native streamed-generation endpoint (workload api "generate")
    chat: str  # the OpenAI chat endpoint (workload api "chat")
    completions: str  # the OpenAI completions endpoint
    flush_cache: str  # POST: empty the prefix cache between ladder steps
    server_info: str  # GET: the resolved server arguments (the knobs as the server took them)
    metrics: str  # GET: Prometheus text
    health: str  # GET: 200 once the server serves

    def request(self, api: str) -> str:
        """The path a streamed request of the workload's api goes to."""
        return self.chat if api == "chat" else self.generate


@dataclass(frozen=True)
class MetricNames:
    """How the engine's /metrics names map onto sweep's canonical names (sweep.analysis.server_metrics).

    A sample's name loses the engine's `prefix` (e.g. "sglang:"); an engine name found in `aliases` is read as
    the canonical name it maps to (where the server does not also export the canonical one)."""

    prefix: str
    aliases: Mapping[str, str] = field(default_factory=dict)
    sim_gpu_gauge: str | None = None  # a simulated server's GPU-memory gauge (real servers: NVML instead)

    def strip(self, name: str) -> str:
        """A sample name without the engine's prefix (names without it, e.g. python_gc_*, stay as they are)."""
        return name[len(self.prefix):] if self.prefix and name.startswith(self.prefix) else name

    def older_names_of(self, canonical: Iterable[str]) -> set[str]:
        """The engine names that alias to any of the canonical names."""
        wanted = set(canonical)
        return {old for old, new in self.aliases.items() if new in wanted}


@dataclass(frozen=True)
class Dialect:
    """One inference engine as sweep talks to it. The one base class of the concept: an engine is a value of
    it (or of a subclass that overrides `server_argv` where its command line has another shape)."""

    name: str  # the profile's server.engine
    launch_module: str  # `python -m <launch_module>` starts the server
    version_package: str  # the distribution whose version is recorded with every study
    companion_packages: tuple[str, ...]  # other distributions whose versions are recorded (torch, kernels)
    ready_line: str  # the log line the server prints once it serves
    knob_flags: Mapping[str, str]  # ServerConfig knob name -> the server's flag (absent: `dashed_flags` spelling)
    model_flag: str  # the flag naming the model
    listen_flags: tuple[str, str]  # (host flag, port flag)
    always_flags: tuple[str, ...]  # flags on every launch (e.g. metrics on)
    api_key_flag: str  # the flag the server reads its API key from (sweep passes it through the environment)
    owned_flags: tuple[str, ...]  # flags sweep sets itself: a profile's extra_args may not set them
    paths: Paths
    metrics: MetricNames
    process_prefix: str = ""  # the name its child processes take (leftover check); "" where they keep python's
    # Knobs a running server takes without a restart (an engine's live-update endpoint, `live_update_path`):
    # configurations that differ only in these share one launch. None in SGLang 0.5.17; kept ready for when the
    # live-update endpoints land (issue 29).
    live_knobs: tuple[str, ...] = ()
    live_update_path: str = ""  # POST: apply live knobs to the running server ("" where there are none)

    def launch_key(self, config: ServerConfig) -> str:
        """What a configuration's launch depends on: its knobs without the live-updatable ones (configurations of
        one key share a launch)."""
        if not self.live_knobs:
            return config.key()
        return ServerConfig(**{k: v for k, v in config.knobs().items() if k not in self.live_knobs}).key()

    def launches(self, configs: Iterable[ServerConfig]) -> int:
        """How many launches measure `configs` when those differing only in live knobs share one."""
        return len({self.launch_key(c) for c in configs})

    def flag(self, knob: str) -> str:
        """The server's flag for a knob: the one place a knob becomes a flag."""
        return self.knob_flags.get(knob) or dashed_flags((knob,))[knob]

    def knob_args(self, config: ServerConfig) -> list[str]:
        """The set knobs and flags of `config` as flags and values, in knob order, then the flags by name; a
        switch (a bool flag, argparse's store_true) is given alone when true and left out when false."""
        args: list[str] = []
        for name, value in config.knobs().items():
            if isinstance(value, bool):
                args += [self.flag(name)] if value else []
            else:
                args += [self.flag(name), str(value)]
        return args

    def server_argv(self, model_path: str, config: ServerConfig, extra_args: Sequence[str],
                    listen: tuple[str, int] | None = None) -> list[str]:
        """The server's arguments for one configuration, never the API key: the model, where it listens, the
        always-on flags, the knobs, the profile's extra args. The launcher starts servers with them; the report
        prints them as the winner's launch command."""
        host_flag, port_flag = self.listen_flags
        where = [host_flag, listen[0], port_flag, str(listen[1])] if listen else []
        return [self.model_flag, model_path, *where, *self.always_flags, *self.knob_args(config), *extra_args]

    def launch_command(self, python: str = "python") -> list[str]:
        """`python -m <launch_module>`: what starts the server where no wrapper command is given."""
        return [python, "-m", self.launch_module]

    def owned_flags_in(self, argv: Iterable[str]) -> list[str]:
        """The flags of argv sweep owns, abbreviations included (argparse expands `--ho` to `--host`)."""
        found = []
        for flag in flags_in_argv(argv):
            owned = ([o for o in self.owned_flags if o.startswith(flag)]
                     if flag.startswith("--") and len(flag) > 3 else [])
            if owned:
                found.append(flag if flag in owned else f"{flag} (short for {owned[0]})")
        return list(dict.fromkeys(found))
