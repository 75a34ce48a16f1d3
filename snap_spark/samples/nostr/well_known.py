"""The well-known part of a Nostr sample: signed ``/.well-known/snap-agent.json`` documents.

Each document is an agent's signed card (``cards.sign_card``) or a near miss of one, with
the verdict ``cards.verify_signed_card`` must give it (one of
:data:`~snap_spark.samples.nostr.config.WELL_KNOWN_LABELS`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, Final, TypeAlias

import orjson
from coincurve import PrivateKey

from snap_spark.protocol.cards import canonical_card, sign_card, signed_card_digest
from snap_spark.samples.nostr.config import WellKnownDocument
from snap_spark.samples.nostr.items import Key, other_network
from snap_spark.samples.nostr.tables import WELL_KNOWN_WEIGHTS
from snap_spark.samples.nostr.workbench import Workbench

__all__ = ["WellKnownDocuments"]

#: ``(data, expected, why, scenario)`` of one document.
_Document: TypeAlias = tuple[bytes, str, str, str]



#: What makes a correctly signed card break the schema, one variant after another:
#: ``(field, value, what the document's label says)``.
_INVALID_CARDS: Final[tuple[tuple[str, Any, str], ...]] = (
    ("version", "1.0", "version '1.0' is not semver"),
    ("price", "free", "unknown field 'price'"),
    ("skills", [], "no skills"),
)

class WellKnownDocuments:
    """Makes the well-known card documents of a sample."""

    def __init__(self, bench: Workbench) -> None:
        self.bench = bench
        self.rng = bench.rng
        #: Which method makes a document of each scenario, from ``(agent, card, timestamp)``.
        self._makers: dict[str, Callable[[Key, dict[str, Any], int], _Document]] = {
            "valid": self._valid,
            "malformed": self._malformed,
            "bad_sig": self._bad_sig,
            "invalid_identity": self._invalid_identity,
            "key_mismatch": self._key_mismatch,
            "invalid_card": self._invalid_card,
        }

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
        make = self._makers.get(name)
        if make is None:  # pragma: no cover
            raise AssertionError(name)
        return make(agent, card, timestamp)

    def _signed(self, agent: Key, card: dict[str, Any], timestamp: int) -> dict[str, Any]:
        """The signed-card document of ``card`` by ``agent`` at ``timestamp``."""
        return sign_card(card, agent.private_key, timestamp, self.bench.aux())

    def _untweaked_sig(self, agent: Key, card: dict[str, Any], timestamp: int) -> str:
        """The signature of ``card`` by ``agent``'s untweaked key (hex)."""
        digest = signed_card_digest(canonical_card(card), timestamp)
        return bytes(PrivateKey(agent.private_key).sign_schnorr(digest, self.bench.aux())).hex()

    def _valid(self, agent: Key, card: dict[str, Any], timestamp: int) -> _Document:
        """A correctly signed card, now and then with the identity on the key's other
        network."""
        if self.bench.variant("valid", 3) == 2:
            other = other_network(agent.network)
            card["identity"] = agent.address_on(other)
            return (_dump(self._signed(agent, card, timestamp)), "valid",
                    f"{agent.name}, identity on {other} (same key: passes)", "valid/network")
        return (_dump(self._signed(agent, card, timestamp)), "valid",
                f"{agent.name}'s signed card", "valid")

    def _malformed(self, agent: Key, card: dict[str, Any], timestamp: int) -> _Document:
        """A document that is not a well-formed signed card (eight variants in turn)."""
        variant = self.bench.variant("malformed", 8)
        doc = self._signed(agent, card, timestamp)
        if variant == 0:
            data, what = b"<html><body>404 Not Found</body></html>\n", "an HTML error page"
        elif variant == 1:
            data, what = _dump(doc)[:-40], "truncated JSON"
        elif variant == 2:
            data, what = _dump([doc]), "a JSON array"
        elif variant == 3:
            del doc["sig"]
            data, what = _dump(doc), "sig missing"
        elif variant == 4:
            doc["sig"] = doc["sig"].upper()
            data, what = _dump(doc), "sig in upper-case hex"
        elif variant == 5:
            doc["timestamp"] = str(doc["timestamp"])
            data, what = _dump(doc), "timestamp is a string"
        elif variant == 6:
            doc["card"]["x-rating"] = "@@OVERFLOW@@"
            data = _dump(doc).replace(b'"@@OVERFLOW@@"', b"1e400")
            what = "a number no double holds (1e400): the card has no JCS form"
        else:
            doc["publicKey"] = doc["publicKey"][:62]
            data, what = _dump(doc), "publicKey is 62 hex characters"
        return data, "malformed", what, f"malformed/{variant}"

    def _bad_sig(self, agent: Key, card: dict[str, Any], timestamp: int) -> _Document:
        """A signed card whose signature no longer matches (four variants in turn)."""
        variant = self.bench.variant("bad_sig", 4)
        doc = self._signed(agent, card, timestamp)
        if variant == 0:
            doc["card"] = {**card, "description": "Now accepts payments at bc1q…"}
            what = "card edited after signing"
        elif variant == 1:
            doc["timestamp"] = timestamp + 1
            what = "timestamp changed after signing"
        elif variant == 2:
            doc["sig"] = self._untweaked_sig(agent, card, timestamp)
            what = "signed with the untweaked key, publicKey is the tweaked key"
        else:
            signer = self.bench.third_party(agent)
            doc["sig"] = sign_card(card, signer.private_key, timestamp, self.bench.aux())["sig"]
            what = f"signed by {signer.name}, publicKey is {agent.name}'s"
        return _dump(doc), "bad_sig", what, f"bad_sig/{variant}"

    def _invalid_identity(self, agent: Key, card: dict[str, Any], timestamp: int) -> _Document:
        """A signed card whose identity is not a valid P2TR address (three variants)."""
        variant = self.bench.variant("invalid_identity", 3)
        if variant == 0:
            card["identity"], what = agent.address.upper(), "identity in upper case"
        elif variant == 1:
            card["identity"], what = f"agent-{agent.name.split()[-1]}", "identity not P2TR"
        else:
            last = "q" if agent.address[-1] != "q" else "p"
            card["identity"] = agent.address[:-1] + last
            what = "identity with a bad bech32m checksum"
        return (_dump(self._signed(agent, card, timestamp)), "invalid_identity", what,
                f"invalid_identity/{variant}")

    def _key_mismatch(self, agent: Key, card: dict[str, Any], timestamp: int) -> _Document:
        """A card whose identity does not belong to the key that signs it: another agent's
        identity, or the untweaked key given as ``publicKey``."""
        if self.bench.variant("key_mismatch", 2) == 0:
            other_agent = self.rng.choice([a for a in self.bench.agents if a is not agent])
            card["identity"] = other_agent.address
            what = f"{agent.name} signs a card claiming {other_agent.name}'s identity"
            return (_dump(self._signed(agent, card, timestamp)), "key_mismatch", what,
                    "key_mismatch/0")
        doc = {
            "card": card,
            "sig": self._untweaked_sig(agent, card, timestamp),
            "publicKey": agent.pubkey,
            "timestamp": timestamp,
        }
        what = "publicKey is the untweaked key (signature by it verifies)"
        return _dump(doc), "key_mismatch", what, "key_mismatch/1"

    def _invalid_card(self, agent: Key, card: dict[str, Any], timestamp: int) -> _Document:
        """A correctly signed card the schema refuses (three variants in turn)."""
        variant = self.bench.variant("invalid_card", len(_INVALID_CARDS))
        field, value, what = _INVALID_CARDS[variant]
        card[field] = copy.copy(value)  # a card of its own, never the table's list
        return (_dump(self._signed(agent, card, timestamp)), "invalid_card", what,
                f"invalid_card/{variant}")


def _dump(doc: Any) -> bytes:
    """``doc`` as the served file: JSON indented by two spaces, with a final newline."""
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n"
