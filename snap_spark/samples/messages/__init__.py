"""Deterministic, realistic SNAP traffic with labelled attacks, for tests, benchmarks and demos.

:func:`generate` simulates agents talking over relays and HTTP gateways and yields one NDJSON
line per message (the input contract of ``docs/architecture.md``, *Input lines*) with a
:class:`Label` that says what the line is (``kind``) and which SNAP code the verifier must
give it (``expected_code``, ``None`` for a valid message). Once every line is read, the
iterator's :meth:`~SampleStream.expected_tasks` gives the ``tasks`` table the lines must
produce, from the generator's own record of the reports it sent (:class:`ExpectedTask`).
:func:`write_sample` writes a sample (gzip when the name ends in ``.gz``), optionally its
labels as JSONL, and its expected tasks beside it (:func:`expected_tasks_path`).

Honest traffic: mainnet and testnet agents (conversations never cross networks) run
multi-turn tasks (``message/send`` with polling, cancelation and ``input_required`` turns,
``message/stream`` with events and ``tasks/resubscribe``) and call HTTP services
(``service/call``, no ``to``). Requests are always signed, about 15 % of responses and events
are not. A few tasks carry an illegal transition or a report from a non-owner: those lines
are valid messages (code ``None``) labelled ``task_illegal_transition`` / ``task_non_owner``.

Attacks (``attack_share`` of the lines) are mutated copies of recent honest messages, with
a fresh ``id`` unless the attack is about the id (replays, a forged copy raced ahead of the
genuine message), so every label follows from the verdict order of §3 alone.

Receipt clock of bare lines: a bare message has no ``received_at``. Labels of bare lines
assume the verifier then takes the message's own ``timestamp`` as its receipt time (the drift
check passes), so only kinds whose code does not depend on the receipt clock are written bare.

Same config, same bytes: all randomness comes from ``random.Random(seed)``, private keys are
``sha256(seed || index)`` and the BIP-340 auxiliary randomness is ``sha256(digest || seed)``.

Examples:
    >>> config = SampleConfig(agents=4, messages=5, seed=1, attack_share=0.0)
    >>> lines = list(generate(config))
    >>> len(lines), lines[0][1].line_no, lines[0][1].expected_code
    (5, 1, None)
    >>> lines == list(generate(config))
    True

Modules, bottom up: :mod:`~snap_spark.samples.messages.config` (config, labels, kinds and
their codes, expected tasks), :mod:`~snap_spark.samples.messages.agents` (keys, networks,
signing), :mod:`~snap_spark.samples.messages.records` (steps, sent messages, task
records), :mod:`~snap_spark.samples.messages.content` (what honest messages say),
:mod:`~snap_spark.samples.messages.conversations` (honest conversations),
:mod:`~snap_spark.samples.messages.mutations` and
:mod:`~snap_spark.samples.messages.attacks` (attacks and broken lines),
:mod:`~snap_spark.samples.messages.simulation` (the clock, :func:`generate`) and
:mod:`~snap_spark.samples.messages.writer` (files, ``python -m snap_spark.samples.messages``).
"""

from snap_spark.samples.messages.agents import sample_agents
from snap_spark.samples.messages.config import (
    ATTACK_KINDS,
    HONEST_KINDS,
    KIND_CODES,
    ExpectedTask,
    Label,
    SampleAgent,
    SampleConfig,
)
from snap_spark.samples.messages.simulation import SampleStream, generate
from snap_spark.samples.messages.writer import (
    expected_tasks_path,
    read_expected_tasks,
    write_sample,
)

__all__ = [
    "ATTACK_KINDS",
    "HONEST_KINDS",
    "KIND_CODES",
    "ExpectedTask",
    "Label",
    "SampleAgent",
    "SampleConfig",
    "SampleStream",
    "expected_tasks_path",
    "generate",
    "read_expected_tasks",
    "sample_agents",
    "write_sample",
]
