"""Rewrite or check the README's registry tables (`relabel.cli.doc_tables`).

python scripts/readme_tables.py --write    # rewrite every <!-- registry:NAME --> block from its registry
python scripts/readme_tables.py --check    # exit 1 naming each stale or missing table
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from relabel.cli.doc_tables import render_readme, stale_tables

README = Path(__file__).resolve().parent.parent / "README.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true", help="rewrite the tables in place")
    action.add_argument("--check", action="store_true", help="exit 1 when a table is stale or missing")
    parser.add_argument("--readme", type=Path, default=README, help="the file to read (default: the README)")
    args = parser.parse_args(argv)
    text = args.readme.read_text(encoding="utf-8")
    if args.write:
        new = render_readme(text)
        if new != text:
            args.readme.write_text(new, encoding="utf-8")
    stale = stale_tables(args.readme.read_text(encoding="utf-8") if args.write else text)
    for name in stale:
        print(
            f"{args.readme.name}: table registry:{name} is stale or missing; run scripts/readme_tables.py --write",
            file=sys.stderr,
        )
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
