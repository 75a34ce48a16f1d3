"""``python -m snap_spark.samples.nostr STEM [--cards N] [--messages N] ...``."""

from snap_spark.samples.nostr.writer import main

if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
