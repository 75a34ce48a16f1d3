"""A Nostr sample from start to end: its parts made in a fixed order, then the lines ordered.

The order is part of the sample: every part draws from the one ``random.Random`` of the
:class:`~snap_spark.samples.nostr.workbench.Workbench`, so the same config gives the same
bytes only when the parts run in the same order (messages, cards, superseded cards,
re-deliveries, forged copies, garbage, well-known documents).
"""

from __future__ import annotations

import math

from snap_spark.samples.nostr.cards import CardEvents
from snap_spark.samples.nostr.config import NostrSample, NostrSampleConfig
from snap_spark.samples.nostr.extras import ExtraLines
from snap_spark.samples.nostr.message_events import MessageEvents
from snap_spark.samples.nostr.tables import (
    CARD_SIZES,
    CARD_WEIGHTS,
    MESSAGE_SIZES,
    MESSAGE_WEIGHTS,
)
from snap_spark.samples.nostr.well_known import WellKnownDocuments
from snap_spark.samples.nostr.workbench import Workbench

__all__ = ["NostrGenerator", "generate_nostr"]


class NostrGenerator:
    """Builds one sample (see :mod:`snap_spark.samples.nostr`). One instance, one sample."""

    def __init__(self, config: NostrSampleConfig) -> None:
        self.config = config
        self.bench = Workbench(config)
        self.messages = MessageEvents(self.bench)
        self.cards = CardEvents(self.bench)
        self.extras = ExtraLines(self.bench)
        self.documents = WellKnownDocuments(self.bench)

    def run(self) -> NostrSample:
        """Make every line and document, order the lines by receipt time, label them."""
        config, bench = self.config, self.bench
        clock = config.start_time
        for name in bench.schedule(MESSAGE_WEIGHTS, config.messages, MESSAGE_SIZES,
                                   "delivered"):
            clock += bench.rng.randint(1, 5)
            self.messages.scenario(name, clock)
        end = max(clock, config.start_time + 600)
        for name in bench.schedule(CARD_WEIGHTS, config.cards, CARD_SIZES, "card"):
            self.cards.scenario(name, end)
        self.cards.resolve_superseded()
        base = config.cards + config.messages
        self.extras.duplicates(math.ceil(config.duplicate_share * base))
        self.extras.forged_copies(math.ceil(config.forged_share * base))
        self.extras.garbage(math.ceil(config.garbage_share * base), config.start_time, end)

        bench.items.sort(key=lambda item: (item.at, item.seq))
        for line_no, item in enumerate(bench.items, start=1):
            item.line_no = line_no
        well_known = self.documents.documents()
        keyring = [a for a in bench.agents if a.keyring]
        return NostrSample(
            lines=tuple(item.line() for item in bench.items),
            labels=tuple(item.label() for item in bench.items),
            well_known=tuple(well_known),
            keyring_pubkeys=tuple(a.pubkey for a in keyring),
            keyring=tuple(a.private_key for a in keyring),
        )


def generate_nostr(config: NostrSampleConfig) -> NostrSample:
    """Build a labelled Nostr sample in memory (see :mod:`snap_spark.samples.nostr`).

    Examples:
        >>> from snap_spark.samples.nostr.config import WELL_KNOWN_LABELS
        >>> sample = generate_nostr(NostrSampleConfig(agents=4, cards=4, messages=20,
        ...                                           well_known=6, seed=1))
        >>> sorted(set(sample.well_known_counts())) == sorted(WELL_KNOWN_LABELS)
        True
    """
    return NostrGenerator(config).run()
