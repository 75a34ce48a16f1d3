"""Nostr relays for snap-spark: a local relay, a relay client, and the shapes of event lines.

- :mod:`snap_spark.nostr.relay` runs a local relay (nostr-sdk's ``LocalRelay``) in memory or
  on an LMDB database folder: ``snap-spark relay --port 7447``.
- :mod:`snap_spark.nostr.client` fetches stored events from relays, each relay on its own
  (:func:`~snap_spark.nostr.client.fetch_events`), and publishes event JSON texts to one
  relay (:func:`~snap_spark.nostr.client.publish_events`): ``snap-spark publish``.
- :mod:`snap_spark.nostr.lines` finds the event in one archived line, whether the line is the
  event itself, a relay ``EVENT`` frame or an envelope with the receipt time
  (:func:`~snap_spark.nostr.lines.event_from_line`). Pure Python, no nostr-sdk.

The verdicts on events (NIP-01 id and signature, agent cards) are
:mod:`snap_spark.protocol.nostr`'s; nothing here judges an event, it only moves them.
"""
