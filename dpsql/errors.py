"""Errors raised to analysts.  Messages name the construct or argument, never a data value."""

from __future__ import annotations


class PrivacyError(Exception):
    """A query was refused or failed under the privacy contract; ``code`` is a stable ``DPSQL-E0xx``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
