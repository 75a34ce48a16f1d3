"""SNAP message events (kinds 4339 and 21339) built to fail one check each, and the verdict
each must get.

NIP-44 payloads no key decrypts as they should (``decrypt_failed``), inner messages
addressed to someone else than the ``p`` tag (``recipient_mismatch``), inner messages with
a bad signature or a broken constraint (``inner_invalid``), events changed after signing
(``bad_event_id``) and events with a signature that does not verify (``bad_event_sig``).
Each event passes every other check, so the label follows from the check order alone.
"""

from __future__ import annotations

import base64

import orjson
from coincurve import PrivateKey

from snap_spark.protocol.keys import encode_p2tr
from snap_spark.protocol.signing import message_digest, sign_message
from snap_spark.samples.nostr.nip44 import (
    NIP44_MAX_PLAINTEXT,
    nip44_encrypt,
    nip44_pad,
    nip44_payload,
)
from snap_spark.samples.nostr.workbench import Workbench
from snap_spark.samples.nostr.wrapping import Wrapper

__all__ = ["MessageFaults"]


class MessageFaults:
    """Makes the message events that fail a check on purpose."""

    def __init__(self, bench: Workbench, wrapper: Wrapper) -> None:
        self.bench = bench
        self.wrapper = wrapper
        self.rng = bench.rng

    def decrypt_failed(self, ts: int) -> None:
        """A message to a keyring recipient whose content the recipient's key cannot
        decrypt (eight variants in turn: MAC, key, encoding, version, base64, padding,
        UTF-8, size)."""
        sender, recipient = self.bench.keyring_pair()
        inner = self.wrapper.inner(sender, recipient.address, ts)
        conversation = self.bench.conversation(sender, recipient.pubkey)
        nonce = self.rng.randbytes(32)
        plaintext = orjson.dumps(inner)
        variant = self.bench.variant("decrypt_failed", 8)
        if variant == 0:
            payload = bytearray(base64.b64decode(nip44_encrypt(plaintext.decode(), conversation,
                                                               nonce)))
            payload[-1] ^= 0x01
            content, what = base64.b64encode(bytes(payload)).decode(), "MAC tampered"
        elif variant == 1:
            other = self.bench.third_party(sender, recipient)
            content = nip44_encrypt(plaintext.decode(),
                                    self.bench.conversation(sender, other.pubkey), nonce)
            what = f"encrypted for {other.name}, not for the p-tagged recipient"
        elif variant == 2:
            content = "#" + nip44_encrypt(plaintext.decode(), conversation, nonce)[1:]
            what = "payload starts with '#' (unsupported encoding)"
        elif variant == 3:
            content = nip44_payload(conversation, nonce, nip44_pad(plaintext), version=1)
            what = "version byte 1 (only 2 is defined)"
        elif variant == 4:
            content = "this is not base64! " + inner["id"]
            what = "content is not base64"
        elif variant == 5:
            padded = bytearray(nip44_pad(plaintext))
            padded[0:2] = NIP44_MAX_PLAINTEXT.to_bytes(2, "big")
            content = nip44_payload(conversation, nonce, bytes(padded))
            what = "valid MAC, padding declares more plaintext than there is"
        elif variant == 6:
            raw = b"\xff\xfe" + plaintext
            content = nip44_payload(conversation, nonce, nip44_pad(raw))
            what = "valid MAC, plaintext not UTF-8"
        else:
            junk = bytes([2]) + self.rng.randbytes(120_000)
            content = base64.b64encode(junk).decode()
            what = f"huge content ({len(content)} characters), over NIP-44's size limit"
        created, received = self.wrapper.live(ts)
        event = self.wrapper.wrap(sender, recipient.pubkey, content, created)
        item = self.bench.add(received, f"decrypt_failed/{variant}", "decrypt_failed",
                              f"{sender.name} to {recipient.name} (keyring): {what}",
                              event=event, genuine=True, clock_free=True)
        self.bench.pick_form(item)

    def misaddressed(self, ts: int) -> None:
        """An inner message whose ``to`` is not the ``p``-tagged recipient's address."""
        sender, recipient = self.bench.keyring_pair()
        if self.bench.variant("misaddressed", 2) == 0:
            others = [a for a in self.bench.agents
                      if a.network == sender.network and a not in (sender, recipient)]
            other = self.rng.choice(others) if others else self.bench.strangers[0]
            to = other.address_on(sender.network)  # same network: only the recipient is wrong
            what = f"inner to is {other.name}, p tag is {recipient.name}"
        else:
            to = encode_p2tr(bytes.fromhex(recipient.pubkey), recipient.network)
            what = (f"inner to encodes {recipient.name}'s untweaked key (not its taproot "
                    "address)")
        inner = self.wrapper.inner(sender, to, ts)
        created, received = self.wrapper.live(ts)
        event = self.wrapper.seal(sender, recipient, inner, created)
        item = self.bench.add(received, "misaddressed", "recipient_mismatch", what, event=event,
                              genuine=True, clock_free=True)
        self.bench.pick_form(item)

    def inner_bad_sig(self, ts: int) -> None:
        """An inner message whose signature does not verify (2001)."""
        sender, recipient = self.bench.keyring_pair()
        inner = self.wrapper.inner(sender, recipient.address, ts)
        variant = self.bench.variant("inner_bad_sig", 3)
        if variant == 0:
            inner["payload"]["message"]["parts"][0]["text"] += " (edited)"
            what = "payload edited after signing"
        elif variant == 1:
            raw = PrivateKey(sender.private_key).sign_schnorr(message_digest(inner),
                                                              self.bench.aux())
            inner["sig"] = bytes(raw).hex()
            what = "signed with the untweaked key"
        else:
            other = self.bench.third_party(sender)
            inner = sign_message(inner, other.private_key, self.bench.aux())
            what = f"signed by {other.name}'s key"
        self.wrapper.inner_invalid("inner_bad_sig", sender, recipient, inner, ts, 2001, what)

    def inner_constraint(self, ts: int) -> None:
        """A signed inner message that breaks a pattern of the schema (1004)."""
        sender, recipient = self.bench.keyring_pair()
        inner = self.wrapper.inner(sender, recipient.address, ts, signed=False)
        variant = self.bench.variant("inner_constraint", 3)
        if variant == 0:
            inner["method"], what = "Message/Send", "method 'Message/Send' breaks the pattern"
        elif variant == 1:
            inner["version"], what = "1", "version '1' breaks ^\\d+\\.\\d+$"
        else:
            inner["id"], what = "msg@" + inner["id"][:8], "id with '@' breaks the id pattern"
        inner = sign_message(inner, sender.private_key, self.bench.aux())
        self.wrapper.inner_invalid("inner_constraint", sender, recipient, inner, ts, 1004, what)

    def tampered_event(self, ts: int) -> None:
        """An event changed after signing, its id kept (``bad_event_id``)."""
        sender, recipient = self.bench.keyring_pair()
        inner = self.wrapper.inner(sender, recipient.address, ts)
        created, received = self.wrapper.live(ts)
        event = self.wrapper.seal(sender, recipient, inner, created)
        variant = self.bench.variant("tampered_event", 3)
        if variant == 0:
            other = self.bench.third_party(sender, recipient)
            event["tags"][0][1], what = other.pubkey, f"p tag redirected to {other.name}"
        elif variant == 1:
            event["created_at"] -= 3600
            what = "created_at moved an hour back"
        else:
            content = event["content"]
            flipped = "A" if content[50] != "A" else "B"
            event["content"] = content[:50] + flipped + content[51:]
            what = "one content character changed"
        item = self.bench.add(received, "tampered_event", "bad_event_id",
                              f"{what} after signing, id kept", event=event, clock_free=True)
        self.bench.pick_form(item)

    def bad_event_sig(self, ts: int) -> None:
        """An event whose id is right and whose signature does not verify."""
        sender, recipient = self.bench.keyring_pair()
        inner = self.wrapper.inner(sender, recipient.address, ts)
        created, received = self.wrapper.live(ts)
        event = self.wrapper.seal(sender, recipient, inner, created)
        what = self.bench.bad_signature(event, sender, "bad_event_sig")
        item = self.bench.add(received, "bad_event_sig", "bad_event_sig", what, event=event,
                              clock_free=True)
        self.bench.pick_form(item)
