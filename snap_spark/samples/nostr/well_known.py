"""The well-known part of a Nostr sample: signed ``/.well-known/snap-agent.json`` documents.

Each document is an agent's signed card (``cards.sign_card``) or a near miss of one, with
the verdict ``cards.verify_signed_card`` must give it (one of
:data:`~snap_spark.samples.nostr.config.WELL_KNOWN_LABELS`).
"""

from __future__ import annotations

from typing import Any

import orjson
from coincurve import PrivateKey

from snap_spark.protocol.cards import canonical_card, sign_card, signed_card_digest
from snap_spark.samples.nostr.config import WellKnownDocument
from snap_spark.samples.nostr.items import other_network
from snap_spark.samples.nostr.tables import WELL_KNOWN_WEIGHTS
from snap_spark.samples.nostr.workbench import Workbench

__all__ = ["WellKnownDocuments"]


class WellKnownDocuments:
    """Makes the well-known card documents of a sample."""

    def __init__(self, bench: Workbench) -> None:
        self.bench = bench
        self.rng = bench.rng

    def documents(self) -> list[WellKnownDocument]:
        """``config.well_known`` documents, served by hosts ``agent-0001.example`` on."""
        plan = self.bench.schedule(WELL_KNOWN_WEIGHTS, self.bench.config.well_known, {}, "valid")
        docs = []
        for number, name in enumerate(plan, start=1):
            host = f"agent-{number:04d}.example"
            data, expected, why, scenario = self.document(name)
            docs.append(WellKnownDocument(
                path=f"{host}/snap-agent.json",
                url=f"https://{host}/.well-known/snap-agent.json",
                data=data, expected=expected, why=why, scenario=scenario,
            ))
        return docs

    def document(self, name: str) -> tuple[bytes, str, str, str]:
        """``(data, expected, why, scenario)`` of one document of scenario ``name``."""
        rng = self.rng
        agent = rng.choice(self.bench.agents)
        timestamp = self.bench.config.start_time - rng.randint(0, 86_400)
        card = self.bench.card(agent, agent.address)

        def dump(doc: Any) -> bytes:
            return orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n"

        def signed(c: dict[str, Any]) -> dict[str, Any]:
            return sign_card(c, agent.private_key, timestamp, self.bench.aux())

        if name == "valid":
            if self.bench.variant(name, 3) == 2:
                other = other_network(agent.network)
                card["identity"] = agent.address_on(other)
                return (dump(signed(card)), "valid",
                        f"{agent.name}, identity on {other} (same key: passes)", "valid/network")
            return dump(signed(card)), "valid", f"{agent.name}'s signed card", "valid"
        if name == "malformed":
            variant = self.bench.variant(name, 8)
            doc = signed(card)
            if variant == 0:
                data, what = b"<html><body>404 Not Found</body></html>\n", "an HTML error page"
            elif variant == 1:
                data, what = dump(doc)[:-40], "truncated JSON"
            elif variant == 2:
                data, what = dump([doc]), "a JSON array"
            elif variant == 3:
                del doc["sig"]
                data, what = dump(doc), "sig missing"
            elif variant == 4:
                doc["sig"] = doc["sig"].upper()
                data, what = dump(doc), "sig in upper-case hex"
            elif variant == 5:
                doc["timestamp"] = str(doc["timestamp"])
                data, what = dump(doc), "timestamp is a string"
            elif variant == 6:
                doc["card"]["x-rating"] = "@@OVERFLOW@@"
                data = dump(doc).replace(b'"@@OVERFLOW@@"', b"1e400")
                what = "a number no double holds (1e400): the card has no JCS form"
            else:
                doc["publicKey"] = doc["publicKey"][:62]
                data, what = dump(doc), "publicKey is 62 hex characters"
            return data, "malformed", what, f"malformed/{variant}"
        if name == "bad_sig":
            variant = self.bench.variant(name, 4)
            doc = signed(card)
            if variant == 0:
                doc["card"] = {**card, "description": "Now accepts payments at bc1q…"}
                what = "card edited after signing"
            elif variant == 1:
                doc["timestamp"] = timestamp + 1
                what = "timestamp changed after signing"
            elif variant == 2:
                digest = signed_card_digest(canonical_card(card), timestamp)
                doc["sig"] = bytes(PrivateKey(agent.private_key).sign_schnorr(
                    digest, self.bench.aux())).hex()
                what = "signed with the untweaked key, publicKey is the tweaked key"
            else:
                signer = self.bench.third_party(agent)
                doc["sig"] = sign_card(card, signer.private_key, timestamp, self.bench.aux())["sig"]
                what = f"signed by {signer.name}, publicKey is {agent.name}'s"
            return dump(doc), "bad_sig", what, f"bad_sig/{variant}"
        if name == "invalid_identity":
            variant = self.bench.variant(name, 3)
            if variant == 0:
                card["identity"], what = agent.address.upper(), "identity in upper case"
            elif variant == 1:
                card["identity"], what = f"agent-{agent.name.split()[-1]}", "identity not P2TR"
            else:
                last = "q" if agent.address[-1] != "q" else "p"
                card["identity"] = agent.address[:-1] + last
                what = "identity with a bad bech32m checksum"
            return dump(signed(card)), "invalid_identity", what, f"invalid_identity/{variant}"
        if name == "key_mismatch":
            if self.bench.variant(name, 2) == 0:
                other_agent = rng.choice([a for a in self.bench.agents if a is not agent])
                card["identity"] = other_agent.address
                what = f"{agent.name} signs a card claiming {other_agent.name}'s identity"
                return dump(signed(card)), "key_mismatch", what, "key_mismatch/0"
            digest = signed_card_digest(canonical_card(card), timestamp)
            doc = {
                "card": card,
                "sig": bytes(PrivateKey(agent.private_key).sign_schnorr(digest,
                                                                         self.bench.aux())).hex(),
                "publicKey": agent.pubkey,
                "timestamp": timestamp,
            }
            what = "publicKey is the untweaked key (signature by it verifies)"
            return dump(doc), "key_mismatch", what, "key_mismatch/1"
        if name == "invalid_card":
            variant = self.bench.variant(name, 3)
            if variant == 0:
                card["version"], what = "1.0", "version '1.0' is not semver"
            elif variant == 1:
                card["price"], what = "free", "unknown field 'price'"
            else:
                card["skills"], what = [], "no skills"
            return dump(signed(card)), "invalid_card", what, f"invalid_card/{variant}"
        raise AssertionError(name)  # pragma: no cover
