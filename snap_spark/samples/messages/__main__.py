"""``python -m snap_spark.samples.messages OUT [--labels L] [--messages N] ...``."""

from snap_spark.samples.messages.writer import main

if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
