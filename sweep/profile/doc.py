"""docs/profile.md, generated from the profile's pydantic models (`sweep profile-schema` writes it; a test
checks that the checked-in file is current): every field, its type, its default and its meaning."""

from __future__ import annotations

import json
import types
import typing

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from sweep import profile as P

HEADER = """# Profile reference

Generated from `sweep/profile/` by `sweep profile-schema` (`.venv/bin/sweep profile-schema` writes this
file; a test fails when it is out of date). A profile is a YAML file; every field below may be left out
and takes its default, except those marked *required*. `--set key.path=value` overrides one field on the
command line (the value is read as JSON, else as a string), e.g. `--set window.measure_seconds=60`.
Relative `workload.dataset.path` and trace `arrival.path` are looked up in the profile's folder, then in
the working directory (a `sweep worker`: in its `--profile-dir`, then its working directory).
"""

# the sections in the order a profile reads; arrival is one of several kinds
SECTIONS: list[tuple[str, type[BaseModel]]] = [
    ("(top level)", P.Profile), ("sla", P.SLA), ("sla (a list of tiers) / tiers", P.Tier), ("workload", P.Workload), ("workload.mix", P.ModalMix),
    ("workload.prompt_len / workload.output_len", P.LengthDist), ("workload.shared_prefix", P.SharedPrefix),
    ("workload.media", P.MediaSpec), ("workload.dataset", P.Dataset), ("arrival (kind: closed)", P.ClosedArrival),
    ("arrival (kind: constant | poisson)", P.RateArrival), ("arrival (kind: gamma)", P.GammaArrival),
    ("arrival (kind: trace)", P.TraceArrival), ("window", P.Window), ("server", P.ServerSpec),
    ("search", P.Search), ("search.space", P.Space), ("search.space ranges (IntRange)", P.IntRange),
    ("search.space ranges (FloatRange)", P.FloatRange), ("search.screening", P.Screening),
    ("search.far_windows", P.FarWindows), ("search.tie_break", P.TieBreak), ("soak", P.Soak),
    ("crosscheck", P.CrossCheck), ("refine", P.Refine),
]


def _type(annotation: object) -> str:  # a type expression (a class, Literal[...], X | Y, list[X])
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _type(typing.get_args(annotation)[0])
    if origin is typing.Literal:
        return " \\| ".join(json.dumps(a) for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type(a) for a in typing.get_args(annotation))
    if origin is list:
        return f"list of {_type(typing.get_args(annotation)[0])}"
    if annotation is type(None):
        return "none"
    return getattr(annotation, "__name__", str(annotation))


# Defaults that load_profile fills in, not the model: the field is required of the model, not of the file.
LOADER_DEFAULTS: dict[tuple[type[BaseModel], str], str] = {(P.Profile, "name"): "the file's name (without .yaml)"}


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        value = info.get_default(call_default_factory=True, validated_data={})
    elif info.default is PydanticUndefined:
        return "*required*"
    else:
        value = info.default
    if isinstance(value, BaseModel):
        return "see its section" if value.model_dump(exclude_defaults=True) == {} else \
            f"`{json.dumps(value.model_dump(mode='json', exclude_defaults=True))}`"
    return f"`{json.dumps(value)}`"


def reference() -> str:
    """The whole reference as markdown."""
    out = [HEADER]
    seen: set[type[BaseModel]] = set()
    for title, model in SECTIONS:
        seen.add(model)
        out.append(f"## {title}\n")
        if model.__doc__ and model is not P.Profile:
            out.append(" ".join(model.__doc__.split()) + "\n")
        out.append("| field | type | default | meaning |\n| --- | --- | --- | --- |")
        for name, info in model.model_fields.items():
            meaning = (info.description or "").replace("|", "\\|")
            default = LOADER_DEFAULTS.get((model, name)) or _default(info)
            out.append(f"| `{name}` | {_type(info.annotation)} | {default} | {meaning} |")
        out.append("")
    return "\n".join(out)


def models() -> list[type[BaseModel]]:
    """Every model the reference covers (a test checks that none of sweep/profile's is left out)."""
    return [m for _, m in SECTIONS]
