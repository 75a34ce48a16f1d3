"""Labelled sample traffic for tests, benchmarks and demos (``snap-spark sample``).

- :mod:`snap_spark.samples.messages` simulates SNAP agents and writes their messages as
  NDJSON lines, a share of them attacks, each line labelled with the code the verifier must
  give it, and the ``tasks`` table the lines must produce.
- :mod:`snap_spark.samples.nostr` builds what an operator archives from SNAP's Nostr side
  (agent-card events, SNAP messages of kinds 4339 and 21339, well-known card documents),
  each line labelled with the verdict it must get.

Both are deterministic (same config, same bytes) and need no Spark.
"""
