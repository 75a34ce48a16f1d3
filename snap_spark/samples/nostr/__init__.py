"""Deterministic Nostr traffic with labelled verdicts: ``snap-spark sample --nostr STEM``.

:func:`generate_nostr` builds what an operator archives from SNAP's Nostr side: agent-card
events (kind 31337), SNAP messages (NIP-44 encrypted; kind 4339, stored by relays, and a
share of kind 21339, ephemeral, as a live subscriber received them), re-deliveries of
the same event by a second relay, forged copies of genuine event ids, garbage lines, and
signed well-known card documents. Every line gets a :class:`NostrLabel` saying which verdict
(``docs/architecture.md``, *Nostr verdicts*) the verifier must give it, and why. Labels come
from what the generator built on purpose; the generator never asks the protocol's check
functions (the tests do, to cross-check intent against the rules).

:func:`write_nostr_sample` writes, for a stem ``S``:

* ``S.events.jsonl``: one line per event, mostly envelopes ``{"received_at": <unix s>,
  "relay": "wss://…", "event": {…}}``; some raw events and relay frames ``["EVENT", "<sub>",
  {…}]``; garbage lines.
* ``S.labels.jsonl``: one :class:`NostrLabel` per events line, same order.
* ``S.keyring``: the 64-hex private keys of the recipients the operator can read, one a line
  after a ``#`` header, created with mode 0600. Nothing else holds a private key.
* ``S.well-known/<host>/snap-agent.json`` and ``S.well-known-labels.jsonl``.

Same config, same bytes: every choice comes from ``random.Random(seed)``, including BIP-340
auxiliary randomness and NIP-44 nonces (which is why NIP-44 encryption is done here, with a
given nonce: nostr-sdk draws its own; the tests decrypt every payload with nostr-sdk).

Readings where docs/architecture.md, *Nostr verdicts*, and the spec are silent (the labels
follow them):

* **Check order.** Event checks (``bad_event_id``, ``bad_event_sig``) first; then for 4339
  and 21339 alike: ``expired``, ``encrypted``, ``decrypt_failed``, ``from_mismatch``,
  ``recipient_mismatch``, ``inner_invalid``, ``valid``. Cases whose label would change
  under another order are not generated: ``encrypted`` events never expire before receipt,
  ``expired`` ones are addressed to keyring recipients, and an event built for one failure
  passes every other check.
* **Keyring.** An event is ``encrypted`` when the ``p`` key is not in the keyring; such events
  are also *sent* by a key outside it (NIP-44 keys are symmetric), so no checker can read them.
* **Networks.** ``from_mismatch`` and ``recipient_mismatch`` compare with the taproot address
  on the network the inner address's prefix names, as for ``d`` tags (testnet agents talk on
  testnet).
* **NIP-40.** Expired means ``expiration < received_at``; no event sits on the boundary.
* **Kinds 4339 and 21339.** A message event's kind is drawn for each event
  (``ephemeral_share``), in every scenario, and the events of each scenario's second run are
  all 21339, so the ephemeral kind gets every scenario a sample repeats. The same checks and
  labels hold for both kinds, and two events carrying one inner message are a replay pair
  whatever their kinds. Only offline retrieval (a message fetched from a relay late) is
  always a 4339, the kind relays store.
* **Receipt clock.** Inner messages are checked with the default strict rule against the
  envelope's ``received_at`` (±60 s, 120 s replay window, ``docs/verdicts.md``). Live
  deliveries arrive within 22 s of the inner timestamp; messages fetched late from a relay
  (offline retrieval) are deliberately more than 60 s late and labelled ``inner_invalid``
  2004. Replays: the same inner message in a second event within the window and the drift
  is 2006; beyond the drift, 2004. Bare events and frames carry no receipt time, so only
  events whose verdict needs none are written that way (all cards; message events that
  fail before the inner message is checked and have no ``expiration`` tag).
* **Duplicates.** A second line with the same id as an earlier line whose id and signature
  verify is ``duplicate_event``, whatever the first one's verdict (its inner message is not
  checked again, so it is no replay). Forged copies (same id, content or sig changed) are
  ``bad_event_id`` / ``bad_event_sig`` before or after the genuine event and never shadow it.
* **Garbage.** Lines that hold no event, or one that breaks NIP-01's shapes, and correctly
  signed events of a kind other than 31337, 4339 and 21339, are ``malformed``.
* **inner_code** is set for ``inner_invalid`` only (``None`` for ``valid``, and for events
  decided before their inner message is checked).

Examples:
    >>> sample = generate_nostr(NostrSampleConfig(agents=6, cards=12, messages=30,
    ...                                           well_known=12, seed=3))
    >>> len(sample.lines) == len(sample.labels)
    True
    >>> sample.labels[0].line_no, sample.labels[0].expected in EVENT_LABELS
    (1, True)
    >>> sample.lines == generate_nostr(NostrSampleConfig(agents=6, cards=12, messages=30,
    ...                                                  well_known=12, seed=3)).lines
    True
    >>> sorted({label.kind for label in sample.labels if label.kind in MESSAGE_KINDS})
    [4339, 21339]

Modules: :mod:`~snap_spark.samples.nostr.config` (config, labels, the sample),
:mod:`~snap_spark.samples.nostr.nip44` (deterministic NIP-44 v2),
:mod:`~snap_spark.samples.nostr.tables` and :mod:`~snap_spark.samples.nostr.items`
(scenario tables, keys, lines before ordering), :mod:`~snap_spark.samples.nostr.workbench`
(what the parts share), the parts :mod:`~snap_spark.samples.nostr.message_events` (with
:mod:`~snap_spark.samples.nostr.wrapping` and
:mod:`~snap_spark.samples.nostr.message_faults`), :mod:`~snap_spark.samples.nostr.cards`,
:mod:`~snap_spark.samples.nostr.extras` and :mod:`~snap_spark.samples.nostr.well_known`,
then :mod:`~snap_spark.samples.nostr.generator` (the order of the parts) and
:mod:`~snap_spark.samples.nostr.writer` (files, ``python -m snap_spark.samples.nostr``).
"""

from snap_spark.samples.nostr.config import (
    EPHEMERAL_KIND,
    EVENT_LABELS,
    MESSAGE_KINDS,
    STORED_KIND,
    WELL_KNOWN_LABELS,
    NostrLabel,
    NostrSample,
    NostrSampleConfig,
    WellKnownDocument,
)
from snap_spark.samples.nostr.generator import generate_nostr
from snap_spark.samples.nostr.nip44 import (
    nip44_conversation_key,
    nip44_encrypt,
    nip44_padded_length,
)
from snap_spark.samples.nostr.writer import (
    main,
    output_paths,
    read_keyring,
    summary,
    write_nostr_sample,
)

__all__ = [
    "EPHEMERAL_KIND",
    "EVENT_LABELS",
    "MESSAGE_KINDS",
    "STORED_KIND",
    "WELL_KNOWN_LABELS",
    "NostrLabel",
    "NostrSample",
    "NostrSampleConfig",
    "WellKnownDocument",
    "generate_nostr",
    "main",
    "nip44_conversation_key",
    "nip44_encrypt",
    "nip44_padded_length",
    "output_paths",
    "read_keyring",
    "summary",
    "write_nostr_sample",
]
