"""spark-submit entry point: follow Nostr relays live into the lake (SNAP kinds 31337, 4339
and 21339).

    spark-submit jobs/stream_nostr.py --relay wss://relay.example --lake data/lake \\
        --checkpoint data/checkpoints/nostr --keyring agents.keyring

All logic lives in :mod:`snap_spark.nostr.live`; see ``--help``.
"""

import sys

from snap_spark.runtime.spark_path import fix_paths

fix_paths()  # PySpark from its installed folder, not spark-submit's zips: before it loads

from snap_spark.nostr.live import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
