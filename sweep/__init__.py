"""sweep: find the SLA-constrained goodput knee of an SGLang server (see README's Architecture)."""

from sweep import _compat

_compat.install()
