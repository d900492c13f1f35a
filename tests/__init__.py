"""The tests, mirroring the package: one folder per floor of sweep/, and sim, bench, tools, house, faults (README: Tests)."""
