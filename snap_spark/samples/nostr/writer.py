"""Nostr samples on disk: the files of a stem, the keyring, and the command.

:func:`write_nostr_sample` writes, for a stem ``S``, the files :func:`output_paths` names
(see :mod:`snap_spark.samples.nostr`); the keyring is created with mode 0600.
``python -m snap_spark.samples.nostr STEM ...`` and ``snap-spark sample --nostr STEM`` run
it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence

import orjson

from snap_spark.protocol.keys import parse_private_key_lines
from snap_spark.samples.nostr.config import (
    EVENT_LABELS,
    WELL_KNOWN_LABELS,
    NostrSample,
    NostrSampleConfig,
)
from snap_spark.samples.nostr.generator import generate_nostr

__all__ = ["main", "output_paths", "read_keyring", "summary", "write_nostr_sample"]


def output_paths(stem: str) -> dict[str, str]:
    """The files :func:`write_nostr_sample` writes for ``stem``.

    Examples:
        >>> output_paths("out/n")["events"], output_paths("out/n")["well_known"]
        ('out/n.events.jsonl', 'out/n.well-known')
    """
    return {
        "events": f"{stem}.events.jsonl",
        "labels": f"{stem}.labels.jsonl",
        "keyring": f"{stem}.keyring",
        "well_known": f"{stem}.well-known",
        "well_known_labels": f"{stem}.well-known-labels.jsonl",
    }


def read_keyring(path: str) -> list[bytes]:
    """The private keys of a keyring file (``#`` lines and blank lines skipped).

    Raises:
        InvalidPrivateKey: a line is not a valid private key of exactly 64 hex digits
            (:func:`snap_spark.protocol.keys.parse_private_key`); the message names the
            line, never the key.

    Examples:
        >>> import tempfile
        >>> name = os.path.join(tempfile.mkdtemp(), "k")
        >>> with open(name, "w") as handle:
        ...     _ = handle.write("# keys\\n" + "0a" * 32 + "\\n")
        >>> [key.hex()[:4] for key in read_keyring(name)]
        ['0a0a']
    """
    # errors="replace": a decoding error would quote the byte; U+FFFD is refused as not hex
    with open(path, encoding="ascii", errors="replace") as handle:
        return parse_private_key_lines(handle, path)


def _write_private(path: str, data: bytes) -> None:
    """Create ``path`` with mode 0600 from the start (an old file is removed first)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def write_nostr_sample(config: NostrSampleConfig, stem: str) -> NostrSample:
    """Generate a sample and write it beside ``stem`` (:func:`output_paths`); return it.

    Examples:
        >>> import tempfile
        >>> stem = os.path.join(tempfile.mkdtemp(), "n")
        >>> sample = write_nostr_sample(NostrSampleConfig(agents=4, cards=4, messages=8,
        ...                                               well_known=2), stem)
        >>> oct(os.stat(stem + ".keyring").st_mode & 0o777)
        '0o600'
    """
    sample = generate_nostr(config)
    paths = output_paths(stem)
    folder = os.path.dirname(stem)
    if folder:
        os.makedirs(folder, exist_ok=True)
    with open(paths["events"], "wb") as handle:
        handle.write(b"".join(line + b"\n" for line in sample.lines))
    with open(paths["labels"], "wb") as handle:
        handle.write(b"".join(orjson.dumps(label.to_plain()) + b"\n" for label in sample.labels))
    header = (
        f"# snap-spark nostr sample keyring (seed {config.seed}): private keys of the "
        f"{len(sample.keyring)} recipients the operator can read, 64 hex each. Test data.\n"
    )
    _write_private(paths["keyring"], (header + "".join(k.hex() + "\n" for k in sample.keyring))
                   .encode("ascii"))
    root = paths["well_known"]
    os.makedirs(root, exist_ok=True)
    written = set()
    for doc in sample.well_known:
        target = os.path.join(root, doc.path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as handle:
            handle.write(doc.data)
        written.add(doc.path)
    _remove_stale_documents(root, written)
    with open(paths["well_known_labels"], "wb") as handle:
        handle.write(b"".join(orjson.dumps(doc.label()) + b"\n" for doc in sample.well_known))
    return sample


def _remove_stale_documents(root: str, keep: set[str]) -> None:
    """Remove documents an earlier, larger run left (only names this module writes)."""
    for host in sorted(os.listdir(root)):
        path = f"{host}/snap-agent.json"
        if (host.startswith("agent-") and host.endswith(".example") and path not in keep
                and os.path.isfile(os.path.join(root, path))):
            os.unlink(os.path.join(root, path))
            if not os.listdir(os.path.join(root, host)):
                os.rmdir(os.path.join(root, host))


def summary(sample: NostrSample, stem: str) -> str:
    """Counts by label, for people (no key material).

    Examples:
        >>> s = generate_nostr(NostrSampleConfig(agents=4, cards=2, messages=2, well_known=1))
        >>> summary(s, "x").splitlines()[0].startswith("wrote ")
        True
    """
    paths = output_paths(stem)
    rows = [
        f"wrote {len(sample.lines)} lines to {paths['events']} (labels in {paths['labels']}), "
        f"{len(sample.well_known)} well-known documents under {paths['well_known']}/, "
        f"{len(sample.keyring)} keys in {paths['keyring']} (mode 0600)"
    ]
    counts = sample.counts()
    for verdict in EVENT_LABELS:
        if counts[verdict]:
            rows.append(f"  {verdict:24s} {counts[verdict]:7d}")
    rows.append("well-known:")
    wk = sample.well_known_counts()
    for verdict in WELL_KNOWN_LABELS:
        if wk[verdict]:
            rows.append(f"  {verdict:24s} {wk[verdict]:7d}")
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m snap_spark.samples.nostr STEM [--cards N] [--messages N] ...``."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("stem")
    defaults = NostrSampleConfig()
    for name in ("agents", "cards", "messages", "well_known", "seed", "start_time"):
        parser.add_argument(f"--{name.replace('_', '-')}", type=int,
                            default=getattr(defaults, name))
    args = parser.parse_args(argv)
    try:
        config = NostrSampleConfig(agents=args.agents, cards=args.cards, messages=args.messages,
                                   well_known=args.well_known, seed=args.seed,
                                   start_time=args.start_time)
    except ValueError as exc:
        print(f"snap-spark sample --nostr: {exc}", file=sys.stderr)
        return 2
    sample = write_nostr_sample(config, args.stem)
    print(summary(sample, args.stem), file=sys.stderr)
    return 0
