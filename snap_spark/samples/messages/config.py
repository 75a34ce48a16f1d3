"""What a message sample is asked for and what it promises.

:class:`SampleConfig` says what to generate; every line gets a :class:`Label` whose ``kind``
is one of :data:`HONEST_KINDS` or :data:`ATTACK_KINDS` and whose ``expected_code`` is that
kind's code (:data:`KIND_CODES`); :class:`ExpectedTask` is one row of the ``tasks`` table
the lines must produce; :class:`SampleAgent` is one agent identity.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from snap_spark.protocol.keys import Network


@dataclass(frozen=True)
class SampleConfig:
    """What to generate. Same config, byte-identical output.

    Attributes:
        agents: number of agent identities (at least 2).
        messages: number of lines to write.
        seed: seed of every random choice and of the agents' private keys.
        attack_share: share of lines that are attacks or malformed.
        bare_share: share of lines written as bare messages (no envelope).
        start_time: unix seconds of the simulated clock's start.
        testnet_share: share of agents on testnet (``tb1p``).
    """

    agents: int = 20
    messages: int = 100_000
    seed: int = 7
    attack_share: float = 0.10
    bare_share: float = 0.0
    start_time: int = 1_770_163_200
    testnet_share: float = 0.1

    def __post_init__(self) -> None:
        if self.agents < 2:
            raise ValueError("a sample needs at least 2 agents")
        if self.messages < 0:
            raise ValueError("messages must be >= 0")
        for name in ("attack_share", "bare_share", "testnet_share"):
            share = getattr(self, name)
            if not 0.0 <= share <= 1.0:
                raise ValueError(f"{name} must be within [0, 1], got {share}")


@dataclass(frozen=True)
class Label:
    """What one generated line is.

    Attributes:
        line_no: 1-based line number in the sample.
        kind: honest kind (``request``, ``response_unsigned``, ...) or attack kind.
        expected_code: the SNAP error code the verifier must give, ``None`` when valid.
    """

    line_no: int
    kind: str
    expected_code: int | None


@dataclass(frozen=True)
class ExpectedTask:
    """Where the generator meant one task to end up: a row of the ``tasks`` table.

    The generator writes it from its own record of what it sent, not from the protocol's
    fold: the owner is the agent it had run the task, ``state`` the last state that agent
    reported through a legal transition (a repeated state changes nothing), and every
    report it wrote as a valid line is counted, including the illegal ones
    (``task_illegal_transition``) and those sent by another agent (``task_non_owner``).
    Lines that do not verify (replays, attacks built on a report) are never counted.

    Examples:
        >>> from snap_spark.samples.messages import generate
        >>> sample = generate(SampleConfig(agents=4, messages=300, seed=3))
        >>> lines = list(sample)
        >>> task = sample.expected_tasks()[0]
        >>> task.reports >= 1 and task.state in ("submitted", "working", "input_required",
        ...                                      "completed", "failed", "canceled")
        True
    """

    task_id: str
    context_id: str
    owner: str
    state: str
    state_timestamp: int
    last_message_id: str
    reports: int = 0
    transitions: int = 0
    illegal_transitions: int = 0
    foreign_reports: int = 0

    def to_plain(self) -> dict[str, Any]:
        """JSON-able form, one line of the expected-tasks file (columns of ``tasks``)."""
        return {field: getattr(self, field) for field in EXPECTED_FIELDS}


#: Columns of an expected-tasks line, in file order (the ``tasks`` table's, but ``state_time``).
EXPECTED_FIELDS: Final[tuple[str, ...]] = (
    "task_id", "context_id", "owner", "state", "state_timestamp", "last_message_id",
    "reports", "transitions", "illegal_transitions", "foreign_reports",
)  # fmt: skip


@dataclass(frozen=True)
class SampleAgent:
    """One simulated agent identity (private key included: this is test data)."""

    index: int
    network: Network
    private_key: bytes
    internal_key: bytes
    address: str


#: Honest kinds; all are valid messages (code ``None``).
HONEST_KINDS: Final[tuple[str, ...]] = (
    "request",
    "service_call",
    "response",
    "response_unsigned",
    "event",
    "event_unsigned",
    "numeric_edge",  # payload numbers JCS rewrites: 1.0, -0.0, 2^53 + 1, 1e21, 1e-7
    "unicode_keys",  # payload keys sorted differently by UTF-16 and by code point
    "extension_field",  # an unsigned top-level "x-..." field, to be ignored
    "task_illegal_transition",  # owner reports a transition the state table forbids
    "task_non_owner",  # a report for a task from an agent that does not own it
    "genuine_after_forged_copy",  # a genuine request whose forged copy came first
)

#: Attack and edge kinds with the code each line of that kind must get.
ATTACK_KINDS: Final[dict[str, int | None]] = {
    "tampered_payload": 2001,
    "wrong_key": 2001,
    "untweaked_key": 2001,
    "tampered_timestamp": 2001,
    "off_curve_key": 2001,
    "forged_copy_then_genuine": 2001,
    "unsigned_request": 2002,
    "replay_in_window": 2006,
    "replay_outside_window": 2004,
    "stale_timestamp": 2004,
    "future_timestamp": 2004,
    "boundary_drift_60": None,
    "malformed_address": 2005,
    "mixed_network": 1004,
    "missing_field": 1003,
    "wrong_type": 1004,
    "bad_id_pattern": 1004,
    "uppercase_sig": 1004,
    "deep_payload": 1004,
    "boundary_depth_10": None,
    "constraint_violation": 1004,
    "ecmascript_pattern": 1004,
    "number_overflow": 1004,
    "not_json": 1003,
    "not_object": 1003,
    "invalid_utf8": 1003,
    "empty_line": 1003,
    "embedded_not_json": 1003,
}

#: Every kind and its expected code.
KIND_CODES: Final[dict[str, int | None]] = {
    **dict.fromkeys(HONEST_KINDS, None),
    **ATTACK_KINDS,
}
