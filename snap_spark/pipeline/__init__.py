"""DataFrame -> DataFrame transforms of the snap-spark pipeline (read, parse, verify, fold)."""
