"""Pure-Python SNAP rules. No Spark import here: notebooks and services use it too.

Examples:
    >>> from snap_spark.protocol import ReceiptClock, check_message
    >>> checked = check_message({"id": "m1"}, 1770163200, ReceiptClock.refuse())
    >>> checked.verdict, checked.stateless_code, checked.stateless_detail
    ('rejected', 1003, "required field 'version' is absent")
"""

from snap_spark.protocol.checker import LineVerdict, check_lines
from snap_spark.protocol.errors import ERROR_NAMES, ErrorCode, SnapError
from snap_spark.protocol.jcs import canonicalize
from snap_spark.protocol.keys import (
    P2TR,
    InvalidPrivateKey,
    check_private_key,
    decode_p2tr,
    internal_pubkey,
    is_valid_p2tr,
    p2tr_address,
    parse_private_key,
    tweak_private_key,
    tweak_public_key,
)
from snap_spark.protocol.replay import (
    EMPTY_STATE,
    KeyFold,
    ReplayCandidate,
    ReplayDecision,
    ReplayKeyState,
    ReplayVerdict,
    expire,
    fold_candidates,
    replay_step,
    resolve,
)
from snap_spark.protocol.signing import sign_message, signature_input, verify_message
from snap_spark.protocol.tasks import (
    TaskEvent,
    TaskFields,
    TaskReport,
    TaskState,
    extract_report,
    fold_task,
    task_fields,
    task_step,
)
from snap_spark.protocol.validate import (
    Checked,
    MissingReceiptTime,
    ReceiptClock,
    check_message,
    check_record,
)

__all__ = [
    "EMPTY_STATE",
    "ERROR_NAMES",
    "P2TR",
    "Checked",
    "ErrorCode",
    "InvalidPrivateKey",
    "KeyFold",
    "LineVerdict",
    "MissingReceiptTime",
    "ReceiptClock",
    "ReplayCandidate",
    "ReplayDecision",
    "ReplayKeyState",
    "ReplayVerdict",
    "SnapError",
    "TaskEvent",
    "TaskFields",
    "TaskReport",
    "TaskState",
    "canonicalize",
    "check_lines",
    "check_message",
    "check_private_key",
    "check_record",
    "decode_p2tr",
    "expire",
    "extract_report",
    "fold_candidates",
    "fold_task",
    "internal_pubkey",
    "is_valid_p2tr",
    "p2tr_address",
    "parse_private_key",
    "replay_step",
    "resolve",
    "sign_message",
    "signature_input",
    "task_fields",
    "task_step",
    "tweak_private_key",
    "tweak_public_key",
    "verify_message",
]
