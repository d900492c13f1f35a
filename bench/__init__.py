"""Benchmarks run by `make bench`; each writes its numbers to stdout and docs/bench-*.md."""
