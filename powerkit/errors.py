"""The library's own small exception tree; the CLI maps every one of them to exit code 2."""

from __future__ import annotations

__all__ = [
    "BadInputError",
    "DeviceError",
    "NotPermittedError",
    "PowerkitError",
    "UnitError",
]


class PowerkitError(Exception):
    """Base of every error powerkit raises on purpose; the message is one line for the user."""


class BadInputError(PowerkitError):
    """A file, row or option that powerkit cannot use (missing, unknown format, bad value)."""


class UnitError(BadInputError):
    """A duration or power string that does not parse (``"5 mins"``, ``"300"``, ``"-1W"``)."""


class DeviceError(PowerkitError):
    """The GPU management library is missing, failed, or the device is gone."""


class NotPermittedError(DeviceError):
    """The GPU refused an operation for lack of privileges (e.g. setting a power limit)."""
