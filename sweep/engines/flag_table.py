"""An engine version's flag table: every server flag by its name (kv_cache_dtype), its kind and its choices.

Read from the server's own argparse `--help` text: `parse_help` takes the installed server's on a GPU host
(sweep doctor, the launcher's flag check) and a stored table per supported version elsewhere
(sweep/engines/flags/<engine>-<version>.json, written by tools/flag_table.py from that version's `--help`).

Kinds: "bool" (a store_true flag: given or not), "int", "float", "str" (one value: choices, when the help lists
them, are the only values), "list" (several values, nargs: not searchable). The help text names no types, so a
flag with a value is int or float where KIND_HINTS (by name) says so, else str, which any text passes (the server's
own parser still checks it at launch).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from sweep.core.types import FlagScalar, knob_fields

FlagKind = Literal["bool", "int", "float", "str", "list"]

TABLES = Path(__file__).resolve().parent / "flags"

# SGLang flags whose values are numbers (its ServerArgs field types); every other flag with a value is text.
INT_FLAGS = frozenset({
    "max_queued_requests", "max_total_tokens", "max_prefill_tokens",
    "prefill_max_requests", "page_size", "num_continuous_decode_steps", "scheduler_recv_interval",
    "dp_size", "pp_size", "ep_size", "context_length", "stream_interval", "random_seed", "cuda_graph_max_bs",
    "cuda_graph_max_bs_decode", "cuda_graph_max_bs_prefill", "piecewise_cuda_graph_max_tokens",
    "torch_compile_max_bs", "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens",
    "pp_max_micro_batch_size", "hicache_size", "default_priority_value", "tokenizer_worker_num",
    "detokenizer_worker_num", "max_lora_rank", "max_loras_per_batch", "watchdog_timeout", "dist_timeout",
    "priority_scheduling_preemption_threshold", "moe_dp_size", "attn_cp_size", "dcp_size",
    "num_reserved_decode_tokens", "max_mamba_cache_size", "triton_attention_num_kv_splits",
    "flashinfer_mla_disable_ragged", "cpu_offload_gb", "pp_async_batch_depth", "dwdp_size"})
FLOAT_FLAGS = frozenset({
    "schedule_conservativeness", "swa_full_tokens_ratio", "hicache_ratio",
    "speculative_accept_threshold_single", "speculative_accept_threshold_acc", "gpu_memory_utilization",
    "init_new_token_ratio", "new_token_ratio_decay", "min_new_token_ratio", "mamba_full_memory_ratio"})
# ... and the knobs' own types (ServerConfig's fields)
KIND_HINTS: dict[str, FlagKind] = {**dict.fromkeys(INT_FLAGS, "int"), **dict.fromkeys(FLOAT_FLAGS, "float"),
                                   **{f.name: f.metadata["kind"].__name__ for f in knob_fields()}}

_OPTION_LINE = re.compile(r"^  (--?[A-Za-z0-9].*)$")


@dataclass(frozen=True)
class FlagSpec:
    """One server flag: its name (the argparse dest spelling of its first long option), the option, its kind and
    its choices (empty: any value of its kind)."""

    name: str
    option: str
    kind: FlagKind
    choices: tuple[str, ...] = ()

    def coerce(self, value: object) -> FlagScalar:
        """`value` as this flag takes it; ValueError in one line for a value of another kind or outside the choices."""
        if self.kind == "list":
            raise ValueError(f"{self.name} takes several values at once (nargs): not a searchable flag")
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise ValueError(f"{self.name} is a switch ({self.option}, given or not): true or false, not {value!r}")
            return value
        if isinstance(value, bool):
            raise ValueError(f"{self.name} takes {'an' if self.kind == 'int' else 'a'} {self.kind}, not {value!r}")
        if self.kind == "int":
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if not isinstance(value, int):
                raise ValueError(f"{self.name} takes an integer, not {value!r}")
            return value
        if self.kind == "float":
            if not isinstance(value, int | float):
                raise ValueError(f"{self.name} takes a number, not {value!r}")
            return float(value)
        text = str(value)
        if self.choices and text not in self.choices:
            raise ValueError(f"{self.name} {text!r} is not one of its choices ({', '.join(self.choices)})")
        return text

    def argv(self, value: FlagScalar) -> list[str]:
        """The flag on a command line: a switch is given when true and left out when false."""
        if self.kind == "bool":
            return [self.option] if value else []
        return [self.option, str(value)]


@dataclass(frozen=True)
class FlagTable:
    """Every flag of one engine version, by name."""

    engine: str
    version: str
    flags: dict[str, FlagSpec]

    def get(self, name: str) -> FlagSpec:
        """The flag called `name`; ValueError naming the version (and a close name) when it has none."""
        spec = self.flags.get(name)
        if spec is None:
            import difflib

            close = difflib.get_close_matches(name, sorted(self.flags), n=1, cutoff=0.7)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise ValueError(f"{name} is not a flag of {self.engine} {self.version}{hint}")
        return spec

    def to_json(self) -> str:
        return json.dumps({"engine": self.engine, "version": self.version,
                           "flags": {n: [s.option, s.kind, list(s.choices)] for n, s in sorted(self.flags.items())}},
                          indent=0, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> FlagTable:
        raw = json.loads(text)
        flags = {n: FlagSpec(n, o, k, tuple(c)) for n, (o, k, c) in raw["flags"].items()}
        return cls(str(raw["engine"]), str(raw["version"]), flags)


def flag_name(option: str) -> str:
    """--kv-cache-dtype -> kv_cache_dtype."""
    return option.lstrip("-").replace("-", "_")


def parse_help(help_text: str, engine: str, version: str) -> FlagTable:
    """The flag table of an argparse `--help` text (its options body; aliases share their first option's entry)."""
    flags: dict[str, FlagSpec] = {}
    for line in help_text.splitlines():
        m = _OPTION_LINE.match(line)
        if not m:
            continue
        invocation = re.split(r"\s{2,}", m.group(1).strip(), maxsplit=1)[0]
        parts = [p.strip() for p in invocation.split(", ") if p.strip().startswith("--")]
        if not parts:
            continue
        option, _, rest = parts[0].partition(" ")
        if option == "--help":
            continue
        choices: tuple[str, ...] = ()
        if rest.startswith("{"):
            body = rest[1:rest.index("}")] if "}" in rest else rest[1:]
            choices = tuple(c for c in body.split(",") if c)
        name = flag_name(option)
        if "..." in rest or "[" in rest:
            kind: FlagKind = "list"
        elif not rest:
            kind = "bool"
        elif choices:
            kind = "str"
        else:
            kind = KIND_HINTS.get(name, "str")
        for alias in parts:  # every spelling is a flag of the same kind (a deprecated alias under its own name)
            spelt = alias.partition(" ")[0]
            flags.setdefault(flag_name(spelt), FlagSpec(flag_name(spelt), spelt, kind, choices))
    return FlagTable(engine, version, flags)


@cache
def stored(engine: str, version: str) -> FlagTable:
    """The stored flag table of one engine version; ValueError naming the stored versions when there is none."""
    path = TABLES / f"{engine}-{version}.json"
    if not path.is_file():
        raise ValueError(f"no stored flag table for {engine} {version} (stored: {', '.join(stored_versions(engine))})")
    return FlagTable.from_json(path.read_text())


def stored_versions(engine: str) -> list[str]:
    """The versions of `engine` with a stored flag table, oldest first."""
    found = [p.stem.removeprefix(engine + "-") for p in TABLES.glob(f"{engine}-*.json")]
    return sorted(found, key=lambda v: tuple(int(x) if x.isdigit() else 0 for x in v.split(".")))
