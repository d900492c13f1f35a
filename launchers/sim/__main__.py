"""Entry point: python -m launchers.sim --model-path ... (see launchers/sim/cli.py)."""

import sys

from launchers.sim.cli import main

sys.exit(main())
