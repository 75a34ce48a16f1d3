"""What a Nostr sample is asked for and what it promises.

:class:`NostrSampleConfig` says what to generate; every events-file line gets a
:class:`NostrLabel` (one of :data:`EVENT_LABELS`), every well-known document is a
:class:`WellKnownDocument` (one of :data:`WELL_KNOWN_LABELS`), and :class:`NostrSample`
holds a whole generated sample.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Final

#: Storable SNAP message (``discovery.md`` "Nostr Event Types"): relays keep it.
STORED_KIND: Final = 4339
#: Ephemeral SNAP message (the SDK's default ``send()``): relays forward it to live
#: subscribers and never store it; an archive holds it only as a subscriber received it.
EPHEMERAL_KIND: Final = 21339
#: The kinds of the sample's SNAP message events.
MESSAGE_KINDS: Final[tuple[int, ...]] = (STORED_KIND, EPHEMERAL_KIND)

#: Every ``expected`` value of an events-file label (docs/architecture.md, *Nostr verdicts*,
#: plus ``malformed`` for garbage lines and ``duplicate_event`` for a relay's re-delivery).
EVENT_LABELS: Final[tuple[str, ...]] = (
    "malformed",
    "duplicate_event",
    "bad_event_id",
    "bad_event_sig",
    "identity_mismatch",
    "invalid_card",
    "card_identity_mismatch",
    "superseded",
    "expired",
    "encrypted",
    "decrypt_failed",
    "from_mismatch",
    "recipient_mismatch",
    "inner_invalid",
    "valid",
)
#: Every ``expected`` value of a well-known label (``cards.verify_signed_card``'s verdicts).
WELL_KNOWN_LABELS: Final[tuple[str, ...]] = (
    "malformed", "bad_sig", "invalid_identity", "key_mismatch", "invalid_card", "valid",
)  # fmt: skip


@dataclass(frozen=True)
class NostrSampleConfig:
    """What to generate. Same config, byte-identical output.

    Attributes:
        agents: SNAP agents (at least 4): the identities of ``snap-spark sample`` with the
            same ``agents``, ``seed`` and ``testnet_share``. Even-numbered agents are the
            operator's (their keys go to the keyring); three extra "stranger" keys, never in
            the keyring, impersonate and re-wrap.
        cards: kind-31337 events (valid, superseded and broken ones).
        messages: SNAP message events, of kind 4339 or (``ephemeral_share`` of them) 21339.
        well_known: signed well-known card documents.
        seed: seed of every random choice.
        start_time: unix seconds where the message traffic starts.
        testnet_share: share of agents on testnet.
        ephemeral_share: the chance that a message event is of the ephemeral kind 21339
            rather than 4339, drawn for each event of every scenario; the events of each
            scenario's second run are all 21339 unless it is 0 (then nothing is drawn and
            every message is a 4339). Offline retrieval is always a 4339: only a stored
            event can be fetched late.
        duplicate_share, forged_share, garbage_share: extra lines, as shares of
            ``cards + messages``: re-deliveries by a second relay, forged copies of genuine
            event ids, garbage lines.
        stored_clock: the receipt time of a stored message's inner message the labels
            assume (``jobs/ingest_nostr.py --stored-clock``): ``event`` (default: the
            event's ``created_at``) or ``received`` (when the event reached the archive).
    """

    agents: int = 12
    cards: int = 60
    messages: int = 300
    well_known: int = 30
    seed: int = 7
    start_time: int = 1_770_163_200
    testnet_share: float = 0.25
    ephemeral_share: float = 0.3
    duplicate_share: float = 0.04
    forged_share: float = 0.04
    garbage_share: float = 0.08
    stored_clock: str = "event"

    def __post_init__(self) -> None:
        if self.stored_clock not in ("event", "received"):
            raise ValueError("stored_clock must be 'event' or 'received'")
        if self.agents < 4:
            raise ValueError("a Nostr sample needs at least 4 agents")
        for name in ("cards", "messages", "well_known"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        for name in ("testnet_share", "ephemeral_share", "duplicate_share", "forged_share",
                     "garbage_share"):
            share = getattr(self, name)
            if not 0.0 <= share <= 1.0:
                raise ValueError(f"{name} must be within [0, 1], got {share}")


@dataclass(frozen=True)
class NostrLabel:
    """What one events-file line is and the verdict it must get.

    Attributes:
        line_no: 1-based line number in the events file.
        event_id: the ``id`` the line's event claims (64 lowercase hex), else ``None``.
        kind: the event's ``kind`` when it is an integer, else ``None``.
        expected: one of :data:`EVENT_LABELS`.
        inner_code: for ``inner_invalid``, the SNAP error code of the inner message;
            ``None`` otherwise (also for ``valid``).
        why: what the generator did, in a few words.
        scenario: the generator's name for the case (``rewrapped``, ``garbage/truncated``).
        form: ``envelope``, ``event`` (a raw event), ``frame`` (``["EVENT", sub, event]``)
            or ``garbage``.
    """

    line_no: int
    event_id: str | None
    kind: int | None
    expected: str
    inner_code: int | None
    why: str
    scenario: str
    form: str

    def to_plain(self) -> dict[str, Any]:
        """The labels-file line (keys in this order).

        Examples:
            >>> NostrLabel(1, None, None, "malformed", None, "empty line", "garbage/empty",
            ...            "garbage").to_plain()["expected"]
            'malformed'
        """
        return {
            "line_no": self.line_no,
            "event_id": self.event_id,
            "kind": self.kind,
            "expected": self.expected,
            "inner_code": self.inner_code,
            "why": self.why,
            "scenario": self.scenario,
            "form": self.form,
        }


@dataclass(frozen=True)
class WellKnownDocument:
    """One served ``/.well-known/snap-agent.json`` and the verdict it must get.

    Attributes:
        path: where it is written, relative to ``S.well-known/`` (``<host>/snap-agent.json``).
        url: where it would be served.
        data: the document's bytes.
        expected: one of :data:`WELL_KNOWN_LABELS`.
        why: what the generator did.
        scenario: the generator's name for the case.
    """

    path: str
    url: str
    data: bytes = field(repr=False)
    expected: str
    why: str
    scenario: str

    def label(self) -> dict[str, Any]:
        """The well-known-labels line of this document."""
        return {
            "file": self.path,
            "url": self.url,
            "expected": self.expected,
            "why": self.why,
            "scenario": self.scenario,
        }


@dataclass(frozen=True)
class NostrSample:
    """A generated sample (see :func:`~snap_spark.samples.nostr.generator.generate_nostr`).

    ``keyring`` holds private keys and is left out of ``repr``; write it only with
    :func:`~snap_spark.samples.nostr.writer.write_nostr_sample`.
    """

    lines: tuple[bytes, ...]
    labels: tuple[NostrLabel, ...]
    well_known: tuple[WellKnownDocument, ...]
    keyring_pubkeys: tuple[str, ...]
    keyring: tuple[bytes, ...] = field(repr=False)

    def counts(self) -> Counter[str]:
        """Events-file lines per expected verdict."""
        return Counter(label.expected for label in self.labels)

    def well_known_counts(self) -> Counter[str]:
        """Well-known documents per expected verdict."""
        return Counter(doc.expected for doc in self.well_known)
