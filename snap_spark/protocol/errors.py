"""SNAP error codes (``docs/errors.md`` of the spec) and typed exceptions that carry them
(for the codes a check raises: 2001, 2002 and 2006 are decided as codes, never raised)."""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    """Numeric SNAP error codes that a verifier can assign to a message."""

    TASK_NOT_FOUND = 1001
    TASK_NOT_CANCELABLE = 1002
    INVALID_MESSAGE = 1003
    INVALID_PAYLOAD = 1004
    SIGNATURE_INVALID = 2001
    SIGNATURE_MISSING = 2002
    IDENTITY_MISMATCH = 2003
    TIMESTAMP_EXPIRED = 2004
    IDENTITY_INVALID = 2005
    DUPLICATE_MESSAGE = 2006


#: Human names of the codes, as ``errors.md`` spells them.
ERROR_NAMES: dict[int, str] = {
    1001: "TaskNotFoundError",
    1002: "TaskNotCancelableError",
    1003: "InvalidMessageError",
    1004: "InvalidPayloadError",
    2001: "SignatureInvalidError",
    2002: "SignatureMissingError",
    2003: "IdentityMismatchError",
    2004: "TimestampExpiredError",
    2005: "IdentityInvalidError",
    2006: "DuplicateMessageError",
}


class SnapError(ValueError):
    """A protocol rule was broken; ``code`` is the SNAP error code, ``str(e)`` the reason."""

    code: ErrorCode = ErrorCode.INVALID_MESSAGE

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class InvalidMessage(SnapError):
    """1003: not JSON, not an object, or a required field is absent."""

    code = ErrorCode.INVALID_MESSAGE


class InvalidPayload(SnapError):
    """1004: a field has the wrong JSON type or breaks a constraint."""

    code = ErrorCode.INVALID_PAYLOAD


class IdentityInvalid(SnapError):
    """2005: a P2TR address is malformed."""

    code = ErrorCode.IDENTITY_INVALID


class TimestampExpired(SnapError):
    """2004: the timestamp is outside the allowed drift from the receipt time."""

    code = ErrorCode.TIMESTAMP_EXPIRED


def fmt_seconds(value: float) -> str:
    """Seconds for a reason text: ``1770163200`` not ``1.77016e+09``; fractions kept."""
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.6f}".rstrip("0").rstrip(".")
