"""spark-submit entry point: Nostr agent cards and SNAP messages into the lake.

    spark-submit jobs/ingest_nostr.py --lake data/lake --relay ws://127.0.0.1:7447 \
        --keyring data/nostr.keyring
    spark-submit jobs/ingest_nostr.py --lake data/lake --input data/nostr.events.jsonl

All logic lives in :mod:`snap_spark.nostr.ingest`; see ``--help``.
"""

import sys

from snap_spark.runtime.spark_path import fix_paths

fix_paths()  # PySpark from its installed folder, not spark-submit's zips: before it loads

from snap_spark.nostr.ingest_job import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
