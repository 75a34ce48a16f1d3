"""Signed agent cards served at ``/.well-known/snap-agent.json``, as card history rows.

:func:`read_well_known` reads saved documents (files, or folders searched for ``*.json``),
verifies each with :func:`snap_spark.protocol.cards.verify_signed_card` (signature over
SHA-256 of JCS(card) + "|" + timestamp, key bound to the identity, card constraints) and
gives one ``agent_card_history`` row per document: ``source = "well-known"``, keyed by the
document's bytes, ``created_at`` its signed timestamp. Valid ones compete with the Nostr
cards of their identity for ``agent_cards`` (newest first).

Examples:
    >>> import json, tempfile, os
    >>> folder = tempfile.mkdtemp()
    >>> with open(os.path.join(folder, "snap-agent.json"), "w") as out:
    ...     _ = out.write(json.dumps({"card": {}}))
    >>> [(r["verdict"], r["source"]) for r in read_well_known([folder])]
    [('malformed', 'well-known')]
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from typing import Any

from snap_spark.files import storage
from snap_spark.protocol.cards import verify_signed_card

#: Largest document read (a card is at most 64 KiB; the signature and key add little).
MAX_DOCUMENT_BYTES = 1 << 20


def _documents(paths: Sequence[str]) -> Iterator[str]:
    for path in paths:
        if storage.path_kind(path) == "dir":
            for folder, _dirs, names in sorted(os.walk(path)):
                for name in sorted(names):
                    if name.endswith(".json"):
                        yield os.path.join(folder, name)
        else:
            yield path


def read_well_known(paths: Sequence[str]) -> list[dict[str, Any]]:
    """One history row per document under ``paths`` (see the module docstring); a file
    that cannot be read or parsed is a ``malformed`` row with the reason.

    Raises:
        FileNotFoundError: a path does not exist.
    """
    rows: list[dict[str, Any]] = []
    for location in _documents(paths):
        if storage.path_kind(location) == "missing":
            raise FileNotFoundError(f"--well-known {location}: no such file or folder")
        with storage.open_input(location) as handle:
            raw = handle.read(MAX_DOCUMENT_BYTES + 1)
        doc: Any = None
        if len(raw) > MAX_DOCUMENT_BYTES:
            verdict, detail = "malformed", f"document larger than {MAX_DOCUMENT_BYTES} bytes"
        else:
            try:
                doc = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError, RecursionError) as exc:
                verdict, detail = "malformed", f"not a JSON document: {str(exc)[:120]}"
            else:
                verdict, detail = verify_signed_card(doc)
        card = doc.get("card") if isinstance(doc, dict) else None
        identity = card.get("identity") if isinstance(card, dict) else None
        timestamp = doc.get("timestamp") if isinstance(doc, dict) else None
        key = doc.get("publicKey") if isinstance(doc, dict) else None
        rows.append({
            "card_key": "well-known:" + hashlib.sha256(raw).hexdigest(),
            "source": "well-known", "origin": location,
            "identity": identity if isinstance(identity, str) else None,
            "pubkey": key if isinstance(key, str) else None,
            "created_at": timestamp if isinstance(timestamp, int)
            and not isinstance(timestamp, bool) and 0 <= timestamp < 2**53 else None,
            "verdict": verdict, "error_detail": detail,
            "card": json.dumps(card, ensure_ascii=False, separators=(",", ":"))
            if isinstance(card, dict) else None,
        })
    return rows
