"""The agent-card part of a Nostr sample: kind-31337 events, valid, superseded and broken.

Valid cards (some for the key's other network, updates, two versions in one second),
impersonations and bad ``d`` tags (``identity_mismatch``), cards the schema refuses
(``invalid_card``), cards whose identity is not their ``d`` tag
(``card_identity_mismatch``), and events changed after signing or badly signed. Once all
are made, :meth:`CardEvents.resolve_superseded` labels every valid card but the standing
one of its pubkey and ``d`` tag ``superseded``.
"""

from __future__ import annotations

from typing import Any

import orjson

from snap_spark.protocol.keys import Network, encode_p2tr, tweak_private_key
from snap_spark.protocol.nostr import CARD_KIND, card_sort_key, card_tags, sign_event
from snap_spark.samples.nostr.items import Item, Key, other_network
from snap_spark.samples.nostr.workbench import Workbench

__all__ = ["CardEvents"]


class CardEvents:
    """Makes the kind-31337 events of a sample and settles which cards are superseded."""

    def __init__(self, bench: Workbench) -> None:
        self.bench = bench
        self.rng = bench.rng
        self.valid_cards: list[Item] = []
        self.same_second = 0

    def card_times(self, end: int) -> tuple[int, int]:
        """``(created_at, received_at)`` of a card: made up to 30 days before the traffic."""
        start = self.bench.config.start_time
        created = self.rng.randint(start - 30 * 86_400, end)
        received = self.rng.randint(max(start, created), max(start, created) + 600)
        return created, received

    def add_card(self, scenario: str, expected: str, why: str, event: dict[str, Any],
                 received: int, *, genuine: bool = True) -> Item:
        """A card line (clock-free: sometimes written bare); valid ones are noted for
        :meth:`resolve_superseded`."""
        item = self.bench.add(received, scenario, expected, why, event=event, genuine=genuine,
                              clock_free=True)
        if expected == "valid":
            self.valid_cards.append(item)
        self.bench.pick_form(item)
        return item

    def scenario(self, name: str, end: int) -> None:
        """Make the events of scenario ``name`` for a random agent (``end``: the last
        second of the message traffic)."""
        rng = self.rng
        agent = rng.choice(self.bench.agents)
        created, received = self.card_times(end)
        if name in ("card_update", "card_same_second"):
            self._card_versions(name, agent, created, received, end)
            return
        # every other scenario is made by the method named after it
        make = getattr(self, f"_{name}", None)
        if make is None:  # pragma: no cover - the weights table and the methods agree
            raise AssertionError(name)
        make(agent, created, received)

    def _card(self, agent: Key, created: int, received: int) -> None:
        """A valid card of ``agent``, now and then for the same key on the other network."""
        name = "card"
        network: Network = agent.network
        if self.bench.variant("card", 5) == 4:  # the same key's card for the other network
            network = other_network(agent.network)
        identity = agent.address_on(network)
        event = self.bench.card_event(agent, self.bench.card(agent, identity), created)
        self.add_card(name, "valid", f"{agent.name}'s card for {identity[:4]}", event,
                      received)

    def _card_versions(self, name: str, agent: Key, created: int, received: int,
                       end: int) -> None:
        """Two valid versions of ``agent``'s card: an update later on, or (scenario
        ``card_same_second``) two made in the same second."""
        rng = self.rng
        if name == "card_same_second":
            # Two versions in one second, newer than any other card (updates reach at
            # most a day past ``end``), so the lower-id rule decides which stands.
            self.same_second += 1
            created = end + 86_401 + 3600 * self.same_second
            times = [created, created]
        else:
            times = [created, created + rng.randint(60, 86_400)]
        for at in times:
            event = self.bench.card_event(agent, self.bench.card(agent, agent.address), at)
            self.add_card(name, "valid", f"{agent.name} published a new card version",
                          event, received + rng.randint(0, 600))

    def _impersonation(self, agent: Key, created: int, received: int) -> None:
        """Another agent's card, published by ``agent`` or by a stranger."""
        rng = self.rng
        victim = rng.choice([a for a in self.bench.agents if a is not agent])
        attacker = rng.choice([agent, *self.bench.strangers])
        card = self.bench.card(victim, victim.address)
        event = self.bench.card_event(attacker, card, created)
        self.add_card("impersonation", "identity_mismatch",
                      f"{attacker.name} publishes {victim.name}'s card (d tag and identity "
                      f"are {victim.name}'s address)", event, received)

    def _card_identity_mismatch(self, agent: Key, created: int, received: int) -> None:
        """A card of ``agent`` whose identity is another address than its ``d`` tag."""
        name = "card_identity_mismatch"
        if self.bench.variant(name, 2) == 0:
            other = self.rng.choice([a for a in self.bench.agents if a is not agent])
            identity, what = other.address, f"card identity is {other.name}'s address"
        else:
            identity = agent.address_on(other_network(agent.network))
            what = "card identity is the same key's address on the other network"
        card = self.bench.card(agent, identity)
        event = self.bench.card_event(agent, card, created, card_tags(card, agent.address))
        self.add_card(name, "card_identity_mismatch", f"{what}; d tag is {agent.name}'s",
                      event, received)

    def _tampered_card_event(self, agent: Key, created: int, received: int) -> None:
        """A card event changed after signing, its id kept (three variants in turn)."""
        name = "tampered_card_event"
        event = self.bench.card_event(agent, self.bench.card(agent, agent.address), created)
        variant = self.bench.variant(name, 3)
        if variant == 0:
            card = orjson.loads(event["content"])
            card["description"] = "Trusted payments agent, send funds here"
            event["content"], what = orjson.dumps(card).decode(), "card description edited"
        elif variant == 1:
            event["created_at"] += 86_400
            what = "created_at moved a day ahead (to win replacement)"
        else:
            event["tags"].append(["relay", "wss://evil.example"])
            what = "a relay tag added"
        self.add_card(name, "bad_event_id", f"{what} after signing, id kept", event,
                      received, genuine=False)

    def _bad_card_sig(self, agent: Key, created: int, received: int) -> None:
        """A card event with a bad signature."""
        name = "bad_card_sig"
        event = self.bench.card_event(agent, self.bench.card(agent, agent.address), created)
        what = self.bench.bad_signature(event, agent, "bad_card_sig")
        self.add_card(name, "bad_event_sig", what, event, received, genuine=False)

    def _bad_d_tag(self, agent: Key, created: int, received: int) -> None:
        """A card event whose ``d`` tag does not name its key (six variants in turn)."""
        card = self.bench.card(agent, agent.address)
        tags = card_tags(card, agent.address)
        key = agent
        variant = self.bench.variant("bad_d_tag", 6)
        if variant == 0:
            untweaked = encode_p2tr(bytes.fromhex(agent.pubkey), agent.network)
            tags[0][1] = card["identity"] = untweaked
            what = "d tag encodes the untweaked key (not its taproot address)"
        elif variant == 1:
            tags[0][1], what = f"agent-{agent.name.split()[-1]}", "d tag is not a P2TR address"
        elif variant == 2:
            tags[0][1], what = agent.address.upper(), "d tag is the address in upper case"
        elif variant == 3:
            tags = tags[1:]
            what = "no d tag"
        elif variant == 4:
            other = self.rng.choice([a for a in self.bench.agents if a is not agent])
            tags.insert(1, ["d", other.address])
            what = f"a second d tag names {other.name}"
        else:
            key = Key(agent.name, tweak_private_key(agent.private_key), "", agent.network,
                      agent.address, False)
            what = "signed with the taproot-tweaked key: pubkey is Q, d is the address of P"
        event = self.bench.card_event(key, card, created, tags)
        self.add_card(f"bad_d_tag/{variant}", "identity_mismatch", f"{agent.name}: {what}",
                      event, received)

    def _invalid_card(self, agent: Key, created: int, received: int) -> None:
        """A correctly signed card event whose card the schema refuses."""
        card = self.bench.card(agent, agent.address)
        tags = card_tags(card, agent.address)
        variant = self.bench.variant("invalid_card", 6)
        content: str | None = None
        if variant == 0:
            card["version"], what = "1.0", "version '1.0' is not semver"
        elif variant == 1:
            card["price"], what = "free", "unknown top-level field 'price'"
        elif variant == 2:
            card["skills"][0]["tags"], what = ["Code"], "skill tag 'Code' breaks ^[a-z0-9-]+$"
        elif variant == 3:
            content, what = "{'name': 'not JSON'}", "content is not JSON"
        elif variant == 4:
            card["x-blob"] = "z" * 70_000
            what = "huge content (over 64 KiB)"
        else:
            card["skills"], what = [], "no skills"
        template = {
            "created_at": created,
            "kind": CARD_KIND,
            "tags": tags,
            "content": content if content is not None else orjson.dumps(card).decode(),
        }
        event = sign_event(template, agent.private_key, self.bench.aux())
        self.add_card(f"invalid_card/{variant}", "invalid_card", f"{agent.name}: {what}", event,
                      received)

    def resolve_superseded(self) -> None:
        """Among the valid cards of one pubkey and d, all but the standing one are superseded."""
        groups: dict[tuple[str, str], list[Item]] = {}
        for item in self.valid_cards:
            assert item.event is not None
            groups.setdefault((item.event["pubkey"], item.event["tags"][0][1]), []).append(item)
        for group in groups.values():
            standing = min(group, key=lambda item: card_sort_key(item.event or {}))
            for item in group:
                if item is standing:
                    continue
                assert item.event is not None and standing.event is not None
                item.expected = "superseded"
                item.ref = standing
                tie = item.event["created_at"] == standing.event["created_at"]
                item.why = ("same created_at as line {ref}, whose id is lower" if tie
                            else "an older card than line {ref} for the same pubkey and d")
