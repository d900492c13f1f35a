"""Entry point: python -m sglang_sim --model-path ... (see sglang_sim/cli.py)."""

import sys

from sglang_sim.cli import main

sys.exit(main())
