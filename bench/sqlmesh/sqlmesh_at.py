"""Runs the sqlmesh CLI with "now" pinned.

Usage: python sqlmesh_at.py TIME sqlmesh-arguments...

`sqlmesh plan` takes --execution-time, but `sqlmesh run` does not: it reads
the clock (sqlmesh.utils.date.now) to decide which cron intervals are due.
To make both deterministic, the CLI runs inside time_machine.travel(TIME,
tick=False), the library SQLMesh's own tests freeze time with (a dependency
of sqlmesh, so it is in the virtual environment already).
"""

import sys

import time_machine


def main() -> None:
    when = sys.argv[1]
    sys.argv = ["sqlmesh"] + sys.argv[2:]
    with time_machine.travel(when, tick=False):
        from sqlmesh.cli.main import cli

        cli()


if __name__ == "__main__":
    main()
