"""sweep: find the SLA-constrained goodput knee of an SGLang server (see README's Architecture).

The package itself lends nothing: import from the folder that defines a name (`sweep.store`, `sweep.analysis.knee`,
...); the folders and their order are the layers of pyproject.toml's import-linter contracts.
"""
