"""The optional parts of snap-spark and the one line that names a missing one.

``pip install snap-spark`` installs what the batch job, the stream and the lake need.
Three parts need more, each installed by an extra of the package:

- ``nostr``: nostr-sdk, for reading relays (``ingest_nostr --relay``), decrypting stored
  messages with a keyring, ``snap-spark relay`` and ``snap-spark publish``;
- ``audit``: matplotlib, for the audit report's charts (``jobs/audit.py``);
- ``s3``: boto3, for the commit lease on an S3 lake (its conditional put).

A command that needs a part which is not installed stops before it starts Spark, with one
line naming the extra (:func:`require`); a missing module met later is turned into the same
line (:func:`missing_extra`). The extras ``notebook`` (JupyterLab) and ``dev`` (the tools
and tests) are not needed by any command.

Examples:
    >>> sorted(EXTRAS)
    ['audit', 'nostr', 's3']
    >>> require("nostr")  # installed in a checkout: nothing happens
    >>> print(missing_extra(ModuleNotFoundError("No module named 'boto3'", name="boto3")))
    the commit lease on an S3 lake needs boto3, which is not installed: pip install 'snap-spark[s3]'
    >>> missing_extra(ModuleNotFoundError("No module named 'leftpad'", name="leftpad")) is None
    True
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass


@dataclass(frozen=True)
class Extra:
    """An optional part: the extra's name, the module it brings and what needs it."""

    name: str
    #: the top-level module to import
    module: str
    #: the distribution pip installs
    distribution: str
    #: what needs it, as the start of a sentence
    needed_by: str

    def message(self) -> str:
        """The one line a command prints when this part is missing."""
        return (f"{self.needed_by} needs {self.distribution}, which is not installed: "
                f"pip install 'snap-spark[{self.name}]'")


#: Every extra a command may need, by name.
EXTRAS: dict[str, Extra] = {
    extra.name: extra for extra in (
        Extra("nostr", "nostr_sdk", "nostr-sdk",
              "Nostr (relays, publishing, stored-message decryption)"),
        Extra("audit", "matplotlib", "matplotlib", "the audit report's charts"),
        Extra("s3", "boto3", "boto3", "the commit lease on an S3 lake"),
    )
}


class MissingExtra(ImportError):
    """A command needs an optional part that is not installed (exit 2, nothing written)."""


def installed(name: str) -> bool:
    """Whether the module of extra ``name`` can be imported (it is not imported here).

    Examples:
        >>> installed("audit")
        True
    """
    return importlib.util.find_spec(EXTRAS[name].module) is not None


def require(name: str) -> None:
    """Stop with :class:`MissingExtra` unless extra ``name`` is installed.

    Raises:
        MissingExtra: its message names the extra to install.
    """
    if not installed(name):
        raise MissingExtra(EXTRAS[name].message(), name=EXTRAS[name].module)


def missing_extra(exc: ImportError) -> str | None:
    """The one line for an import that failed because an extra is not installed, else
    ``None`` (a different module, or a broken install, keeps its own error)."""
    root = (exc.name or "").split(".")[0]
    for extra in EXTRAS.values():
        if root == extra.module:
            return extra.message()
    return None
