"""Write an engine version's stored flag table (sweep/engines/flags/<engine>-<version>.json) from its `--help`.

usage: python tools/flag_table.py HELP_TEXT_FILE VERSION [ENGINE]
       e.g. python -m sglang.launch_server --help > help.txt; python tools/flag_table.py help.txt 0.5.17

The table is what `search.space` is checked against on a machine without that version installed
(sweep.engines.flag_table); a GPU host checks against its installed server's own `--help` as well.
"""

from __future__ import annotations

import sys
from pathlib import Path

from sweep.engines.flag_table import TABLES, parse_help


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    engine = argv[2] if len(argv) == 3 else "sglang"
    table = parse_help(Path(argv[0]).read_text(), engine, argv[1])
    if not table.flags:
        print(f"{argv[0]}: no flags found (not an argparse --help text?)", file=sys.stderr)
        return 2
    out = TABLES / f"{engine}-{argv[1]}.json"
    out.write_text(table.to_json() + "\n")
    print(f"{out}: {len(table.flags)} flags")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
