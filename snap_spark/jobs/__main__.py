"""``python -m snap_spark.jobs``: where the packaged spark-submit jobs are.

    python -m snap_spark.jobs list                   # each job and what it does
    python -m snap_spark.jobs path verify_messages   # the file to give spark-submit
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from snap_spark.jobs import UnknownJob, job_path, names, summary


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; 0 on success, 2 for an unknown job or a usage error."""
    parser = argparse.ArgumentParser(
        prog="python -m snap_spark.jobs",
        description="The spark-submit jobs shipped in the snap_spark package.",
        epilog='example: spark-submit "$(python -m snap_spark.jobs path verify_messages)" '
               "--input data/sample --lake data/lake")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="each job and what it does")
    path = commands.add_parser("path", help="the absolute path of a job's file")
    path.add_argument("job", help="a job name, e.g. verify_messages")
    args = parser.parse_args(argv)
    if args.command == "list":
        width = max(len(name) for name in names())
        for name in names():
            print(f"{name:<{width}}  {summary(name)}")
        return 0
    try:
        print(job_path(args.job))
    except UnknownJob as error:
        print(f"python -m snap_spark.jobs: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
