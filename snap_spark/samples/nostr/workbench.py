"""The state and tools every part of a Nostr sample generator shares.

One :class:`Workbench` per sample holds the sample's ``random.Random``, its keys (the
agents of ``snap-spark sample`` with the same seed, the even-numbered ones in the
keyring, and three strangers), the lines made so far, and the helpers the parts use: pick
keys, add a line, cycle through a scenario's variants, sign a card event, spoil a
signature.
"""

from __future__ import annotations

import hashlib
import random
import uuid
from collections import Counter
from typing import Any

import orjson
from coincurve import PrivateKey

from snap_spark.protocol.cards import sample_card
from snap_spark.protocol.keys import internal_pubkey, p2tr_address, tweak_private_key
from snap_spark.protocol.nostr import CARD_KIND, card_tags, sign_event
from snap_spark.samples.messages.agents import sample_agents
from snap_spark.samples.messages.config import SampleConfig
from snap_spark.samples.nostr.config import NostrSampleConfig
from snap_spark.samples.nostr.items import Item, Key, derive_key
from snap_spark.samples.nostr.nip44 import nip44_conversation_key
from snap_spark.samples.nostr.tables import AGENT_NAMES, RELAYS

__all__ = ["Workbench"]


class Workbench:
    """What the parts of one Nostr sample share: randomness, keys, lines, helpers."""

    def __init__(self, config: NostrSampleConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        identities = sample_agents(
            SampleConfig(agents=config.agents, seed=config.seed,
                         testnet_share=config.testnet_share)
        )
        self.agents = [
            Key(f"agent {a.index}", a.private_key, a.internal_key.hex(), a.network, a.address,
                keyring=a.index % 2 == 0)
            for a in identities
        ]
        self.strangers: list[Key] = []
        for index in range(3):
            secret = derive_key(config.seed, "stranger", index)
            pub = internal_pubkey(secret)
            self.strangers.append(
                Key(f"stranger {index}", secret, pub.hex(), "mainnet",
                    p2tr_address(pub, "mainnet"), keyring=False)
            )
        self.items: list[Item] = []
        self.seq = 0
        self.variants: Counter[str] = Counter()
        self.conversation_keys: dict[tuple[str, str], bytes] = {}
        self.card_versions: Counter[str] = Counter()

    def aux(self) -> bytes:
        """32 random bytes: BIP-340 auxiliary randomness."""
        return self.rng.randbytes(32)

    def uuid(self) -> str:
        """A random (version 4) UUID."""
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def variant(self, scenario: str, count: int) -> int:
        """Cycle through a scenario's variants, so each appears once the scenario repeats."""
        number = self.variants[scenario] % count
        self.variants[scenario] += 1
        return number

    def add(self, at: int, scenario: str, expected: str, why: str, **kw: Any) -> Item:
        """A new line received at ``at`` (``kw`` sets the other :class:`Item` fields; a
        relay and a subscription id are drawn when not given)."""
        self.seq += 1
        item = Item(at=at, seq=self.seq, scenario=scenario, expected=expected, why=why, **kw)
        if not item.relay:
            item.relay = self.rng.choice(RELAYS)
        if not item.subscription:
            item.subscription = f"snap-{self.rng.randrange(16**6):06x}"
        self.items.append(item)
        return item

    def other_relay(self, relay: str) -> str:
        """A relay that is not ``relay``."""
        return self.rng.choice([r for r in RELAYS if r != relay])

    def pick_form(self, item: Item) -> None:
        """Write a clock-free event bare or as a relay frame now and then."""
        if item.clock_free and item.raw is None:
            roll = self.rng.random()
            if roll < 0.1:
                item.form = "event"
            elif roll < 0.2:
                item.form = "frame"
            if item.form != "envelope":
                item.why += " (written without envelope: the verdict needs no receipt time)"

    def schedule(self, weights: dict[str, int], total: int, sizes: dict[str, int],
                 single: str) -> list[str]:
        """Scenario names adding up to ``total`` events: each once first, then by weight."""
        names = list(weights)
        self.rng.shuffle(names)
        plan: list[str] = []
        left = total
        for name in names:
            if sizes.get(name, 1) <= left:
                plan.append(name)
                left -= sizes.get(name, 1)
        population, cumulative = list(weights), list(weights.values())
        while left > 0:
            name = self.rng.choices(population, cumulative)[0]
            if sizes.get(name, 1) > left:
                name = single
            plan.append(name)
            left -= sizes.get(name, 1)
        return plan

    def conversation(self, sender: Key, recipient_pubkey: str) -> bytes:
        """The NIP-44 conversation key of ``sender`` and a recipient (cached)."""
        key = (sender.pubkey, recipient_pubkey)
        if key not in self.conversation_keys:
            self.conversation_keys[key] = nip44_conversation_key(
                sender.private_key, recipient_pubkey
            )
        return self.conversation_keys[key]

    def keyring_pair(self) -> tuple[Key, Key]:
        """A sender and a keyring recipient on the same network."""
        recipient = self.rng.choice([a for a in self.agents if a.keyring])
        senders = [a for a in self.agents if a.network == recipient.network and a is not recipient]
        return self.rng.choice(senders), recipient

    def outside_pair(self) -> tuple[Key, Key]:
        """A sender and a recipient both outside the keyring (so no key the operator holds
        decrypts it, whether a checker tries the recipient's key or the sender's)."""
        pools: list[list[Key]] = []
        for network in ("mainnet", "testnet"):
            pool = [a for a in self.agents if not a.keyring and a.network == network]
            if network == "mainnet":
                pool += self.strangers
            if len(pool) >= 2:
                pools.append(pool)
        pool = self.rng.choice(pools)
        sender, recipient = self.rng.sample(pool, 2)
        return sender, recipient

    def third_party(self, *exclude: Key) -> Key:
        """A random agent or stranger that is none of ``exclude``."""
        return self.rng.choice([k for k in (*self.agents, *self.strangers) if k not in exclude])

    def bad_signature(self, event: dict[str, Any], owner: Key, scenario: str) -> str:
        """Replace ``event["sig"]`` with a signature that does not verify; say how."""
        variant = self.variant(scenario, 3)
        digest = bytes.fromhex(event["id"])
        if variant == 0:
            other = self.third_party(owner)
            event["sig"] = bytes(PrivateKey(other.private_key).sign_schnorr(digest,
                                                                            self.aux())).hex()
            return f"id signed by {other.name}, pubkey kept"
        if variant == 1:
            tweaked = PrivateKey(tweak_private_key(owner.private_key))
            event["sig"] = bytes(tweaked.sign_schnorr(digest, self.aux())).hex()
            return "id signed with the taproot-tweaked key instead of the Nostr key"
        other_digest = hashlib.sha256(digest).digest()
        event["sig"] = bytes(PrivateKey(owner.private_key).sign_schnorr(other_digest,
                                                                        self.aux())).hex()
        return "a signature of another id by the same key"

    def card(self, key: Key, identity: str, **overrides: Any) -> dict[str, Any]:
        """A new version of ``key``'s agent card claiming ``identity``."""
        index = int(key.name.split()[-1])
        self.card_versions[key.pubkey] += 1
        card = sample_card(
            identity,
            name=f"{AGENT_NAMES[index % len(AGENT_NAMES)]} {index}",
            version=f"1.{self.card_versions[key.pubkey]}.0",
            endpoints=[{"protocol": "http", "url": f"https://agent-{index:03d}.example/snap"}],
            nostrRelays=self.rng.sample(list(RELAYS), 2),
        )
        card.update(overrides)
        return card

    def card_event(self, key: Key, card: dict[str, Any], created_at: int,
                   tags: list[list[str]] | None = None) -> dict[str, Any]:
        """A kind-31337 event of ``card`` signed by ``key`` (tags from the card unless
        given)."""
        claimed = card.get("identity")
        identity = claimed if isinstance(claimed, str) else key.address
        template = {
            "created_at": created_at,
            "kind": CARD_KIND,
            "tags": tags if tags is not None else card_tags(card, identity),
            "content": orjson.dumps(card).decode(),
        }
        return sign_event(template, key.private_key, self.aux())
