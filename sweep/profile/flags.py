"""search.space beyond the five knobs: any flag of the engine version by its name, typed against its flag table.

A flag's dimension is one of (docs/profile.md, section search.space):
- a list of values (categorical): `kv_cache_dtype: [auto, fp8_e5m2]`; a switch (store_true) `[true, false]`;
- a range of an int or float flag: `{low: 64, high: 512, log: true}`, `{low: 0.5, high: 1.5, step: 0.25}`; tpe / gp
  suggest from it (log scale with `log`), the grid sampler needs its `step`;
- a conditional dimension: either form with `when: {other_flag: value-or-values}`, searched only in configurations
  where the other dimension has one of those values (else the flag is left to the server), e.g.
  `speculative_num_steps: {values: [3, 5], when: {speculative_algorithm: EAGLE}}`.

Checked where the profile is read (`check_flags`), against the stored flag table of server.engine_version
(sweep.engines.flag_table): an unknown flag, a value of another kind or outside its choices, a range of a text flag,
a flag sweep sets itself: one line, exit 2, before anything runs. `sweep doctor` checks the same names against
the installed server's own `--help`.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import Field, StrictBool, StrictFloat, StrictInt, StrictStr, model_validator

from sweep import engines
from sweep.core.types import FlagScalar
from sweep.engines.flag_table import FlagSpec, FlagTable, stored
from sweep.profile.base import MAX_GRID
from sweep.profile.base import Strict as _Strict

Scalar = StrictBool | StrictInt | StrictFloat | StrictStr
# flags a search never sets: sweep's own (the launcher's) and the multi-GPU ones left to the two-GPU issue
NOT_SEARCHED = {"dp_size": "data parallelism is the two-GPU issue's (not searched yet)",
                "enable_dp_attention": "attention data parallelism is the two-GPU issue's (not searched yet)"}


class FlagRange(_Strict):
    """A range of an int or float flag."""

    low: StrictInt | StrictFloat = Field(description="smallest value")
    high: StrictInt | StrictFloat = Field(description="largest value")
    step: StrictInt | StrictFloat | None = Field(None, gt=0, description="spacing of the values (the grid needs it)")
    log: bool = Field(False, description="suggest on a log scale (tpe / gp; low > 0, no step)")
    when: dict[str, Scalar | list[Scalar]] | None = Field(None, description="searched only where another "
                                                          "dimension has one of these values")

    @model_validator(mode="after")
    def _ordered(self) -> FlagRange:
        if self.low > self.high:
            raise ValueError("low must be <= high")
        if self.log and (self.low <= 0 or self.step is not None):
            raise ValueError("a log range needs low > 0 and no step")
        return self


class FlagChoice(_Strict):
    """A conditional list of values."""

    values: list[Scalar] = Field(min_length=1, description="the values (categorical)")
    when: dict[str, Scalar | list[Scalar]] = Field(description="searched only where another dimension has one of "
                                                   "these values")


FlagDimension = Annotated[list[Scalar] | FlagRange | FlagChoice, Field(description="a flag's searched values")]


def condition_of(dim: object) -> dict[str, list[FlagScalar]]:
    """A dimension's `when`, each value as a list (empty: unconditional)."""
    when = getattr(dim, "when", None) or {}
    return {k: (list(v) if isinstance(v, list) else [v]) for k, v in when.items()}


def values_of(dim: object, spec: FlagSpec | None = None) -> list[FlagScalar] | None:
    """A flag dimension's explicit values (a list, a conditional list, a stepped range); None: a range without a
    step (continuous, for tpe / gp only)."""
    if isinstance(dim, list):
        return list(dim)
    if isinstance(dim, FlagChoice):
        return list(dim.values)
    if isinstance(dim, FlagRange):
        if dim.step is None:
            return None
        n = int(math.floor((dim.high - dim.low) / dim.step + 1e-9)) + 1
        as_int = spec is not None and spec.kind == "int"
        return [int(dim.low + i * dim.step) if as_int else round(dim.low + i * dim.step, 6) for i in range(n)]
    raise TypeError(f"unsupported flag dimension {dim!r}")


def table_for(engine: str, version: str) -> FlagTable:
    return stored(engine, version)


def check_flags(dims: dict[str, Any], knob_values: dict[str, Any], engine: str, version: str,
                sampler: str) -> dict[str, Any]:
    """The flag dimensions of a space, each value typed as its flag takes it; ValueError in one line naming the
    flag for an unknown flag, a bad value, a range of a text flag, a grid over a range without a step, or a `when`
    naming no searched dimension (or a value it never takes)."""
    try:
        table = table_for(engine, version)
    except ValueError as exc:
        raise ValueError(f"server.engine_version: {exc}") from None
    dialect = engines.get(engine)
    out: dict[str, Any] = {}
    for name, dim in dims.items():
        where = f"search.space.{name}"
        try:
            spec = table.get(name)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        if name in NOT_SEARCHED:
            raise ValueError(f"{where}: {NOT_SEARCHED[name]}")
        if dialect.owned_flags_in([spec.option]):
            raise ValueError(f"{where}: {spec.option} is set by sweep itself, not searched")
        try:
            out[name] = _typed(dim, spec, sampler)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
    searched: dict[str, list[Any] | None] = {**knob_values, **{n: values_of(d) for n, d in out.items()}}
    for name, dim in out.items():
        for other, wanted in condition_of(dim).items():
            if other == name or other not in searched:
                raise ValueError(f"search.space.{name}: when names {other!r}, which the space does not search")
            known = searched[other]
            bad = [w for w in wanted if known is not None and w not in known]
            if bad:
                raise ValueError(f"search.space.{name}: when {other} is {bad[0]!r}, a value {other} never takes "
                                 f"(its values: {', '.join(map(str, known or []))})")
    return out


def _typed(dim: object, spec: FlagSpec, sampler: str) -> object:
    """One dimension with its values coerced to the flag's kind (ValueError: the first problem)."""
    if isinstance(dim, FlagRange):
        if spec.kind not in ("int", "float"):
            raise ValueError(f"a range needs a number flag; {spec.name} takes {_kind_words(spec)}: list its values")
        if spec.kind == "int" and not all(float(x).is_integer() for x in (dim.low, dim.high, dim.step or 1)):
            raise ValueError(f"{spec.name} takes integers: low, high and step must be whole numbers")
        if sampler == "grid" and dim.step is None:
            raise ValueError("a range without a step with the grid sampler (give step, or search.sampler tpe)")
        if dim.step is not None and (dim.high - dim.low) / dim.step + 1 > MAX_GRID:
            raise ValueError(f"expands to more than {MAX_GRID} values: use a larger step")
        return dim
    values = dim.values if isinstance(dim, FlagChoice) else dim
    assert isinstance(values, list)
    if not values:
        raise ValueError("must list at least one value")
    typed = [spec.coerce(v) for v in values]
    if len(set(map(repr, typed))) != len(typed):
        raise ValueError("lists a value twice")
    return dim.model_copy(update={"values": typed}) if isinstance(dim, FlagChoice) else typed


def _kind_words(spec: FlagSpec) -> str:
    if spec.kind == "bool":
        return "true or false (a switch)"
    if spec.choices:
        return f"one of {', '.join(spec.choices)}"
    return "text" if spec.kind == "str" else "several values (not searchable)"
