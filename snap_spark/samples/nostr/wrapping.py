"""SNAP message events: a SNAP message, NIP-44 encrypted, wrapped in a signed Nostr event.

:class:`Wrapper` makes the inner SNAP messages and the events around them for the message
scenarios of :mod:`~snap_spark.samples.nostr.message_events` and
:mod:`~snap_spark.samples.nostr.message_faults`. Each event is of kind 4339 (stored by
relays) or, for :attr:`~snap_spark.samples.nostr.config.NostrSampleConfig.ephemeral_share`
of them, 21339 (ephemeral): the checks and the labels are the same for both.
"""

from __future__ import annotations

from typing import Any

import orjson

from snap_spark.protocol.nostr import sign_event
from snap_spark.protocol.signing import sign_message
from snap_spark.samples.nostr.config import EPHEMERAL_KIND, STORED_KIND
from snap_spark.samples.nostr.items import Item, Key
from snap_spark.samples.nostr.nip44 import nip44_encrypt
from snap_spark.samples.nostr.tables import STATES, TEXTS
from snap_spark.samples.nostr.workbench import Workbench

__all__ = ["Wrapper"]


class Wrapper:
    """Inner SNAP messages and the kind-4339 and kind-21339 events that carry them."""

    def __init__(self, bench: Workbench) -> None:
        self.bench = bench
        self.rng = bench.rng
        #: the kind of every event wrapped while it is set (no draw), unless one is given
        self.forced_kind: int | None = None

    def inner(self, sender: Key, to: str, ts: int, *, msg_type: str = "request",
              signed: bool = True) -> dict[str, Any]:
        """A SNAP message from ``sender`` (its address on its network) to ``to``."""
        if msg_type == "request":
            payload: dict[str, Any] = {
                "message": {
                    "messageId": self.bench.uuid(),
                    "role": "user",
                    "parts": [{"text": self.rng.choice(TEXTS)}],
                }
            }
        else:
            payload = {
                "task": {
                    "id": f"task-{self.bench.uuid()}",
                    "contextId": f"ctx-{self.bench.uuid()}",
                    "status": {"state": self.rng.choice(STATES)},
                }
            }
        message = {
            "id": self.bench.uuid(),
            "version": "0.1",
            "from": sender.address,
            "to": to,
            "type": msg_type,
            "method": "message/send",
            "payload": payload,
            "timestamp": ts,
        }
        return sign_message(message, sender.private_key, self.bench.aux()) if signed else message

    def message_kind(self) -> int:
        """The kind of the next message event: :attr:`forced_kind` when set, else 21339 with
        the config's ``ephemeral_share`` (nothing is drawn when it is 0), else 4339."""
        if self.forced_kind is not None:
            return self.forced_kind
        share = self.bench.config.ephemeral_share
        if share > 0 and self.rng.random() < share:
            return EPHEMERAL_KIND
        return STORED_KIND

    def wrap(self, wrapper: Key, recipient_pubkey: str, content: str, created_at: int,
             expiration: int | None = None, kind: int | None = None) -> dict[str, Any]:
        """A message event of ``content`` for ``recipient_pubkey``, signed by ``wrapper``, of
        ``kind`` (drawn by :meth:`message_kind` when ``None``)."""
        tags = [["p", recipient_pubkey]]
        if expiration is not None:
            tags.append(["expiration", str(expiration)])
        template = {"created_at": created_at,
                    "kind": self.message_kind() if kind is None else kind, "tags": tags,
                    "content": content}
        return sign_event(template, wrapper.private_key, self.bench.aux())

    def encrypt(self, sender: Key, recipient_pubkey: str, inner: dict[str, Any]) -> str:
        """``inner`` as a NIP-44 v2 payload from ``sender`` to ``recipient_pubkey``."""
        return nip44_encrypt(
            orjson.dumps(inner).decode(), self.bench.conversation(sender, recipient_pubkey),
            self.rng.randbytes(32),
        )

    def seal(self, sender: Key, recipient: Key, inner: dict[str, Any], created_at: int,
             expiration: int | None = None, kind: int | None = None) -> dict[str, Any]:
        """``inner`` encrypted by ``sender`` for ``recipient`` and wrapped by ``sender``."""
        content = self.encrypt(sender, recipient.pubkey, inner)
        return self.wrap(sender, recipient.pubkey, content, created_at, expiration, kind)

    def live(self, ts: int) -> tuple[int, int]:
        """``(created_at, received_at)`` of a message sent at ``ts`` and received live."""
        created = ts + self.rng.randint(0, 2)
        return created, created + self.rng.randint(0, 20)

    def maybe_expiration(self, created: int) -> int | None:
        """A far expiration tag on some events (days ahead: never reached here)."""
        if self.rng.random() < 0.4:
            return created + self.rng.randint(86_400, 7 * 86_400)
        return None

    def inner_invalid(self, name: str, sender: Key, recipient: Key, inner: dict[str, Any],
                      ts: int, code: int, what: str) -> Item:
        """A live delivery to a keyring recipient whose inner message gets ``code``."""
        created, received = self.live(ts)
        content = self.encrypt(sender, recipient.pubkey, inner)  # before the expiration
        event = self.wrap(sender, recipient.pubkey, content, created,
                          self.maybe_expiration(created))
        return self.bench.add(received, name, "inner_invalid",
                              f"{what}: inner message gets {code}", event=event, genuine=True,
                              inner_code=code)
