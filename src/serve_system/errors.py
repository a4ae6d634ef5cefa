"""User-facing errors.

Every error a user can act on is a :class:`ServeSystemError`. Its message is one line that says
what went wrong and how to fix it; the CLI and the chi_scripts print it on stderr and exit non-zero,
without a traceback.
"""

from __future__ import annotations


class ServeSystemError(Exception):
    """An error whose message is meant for the user (one line, names the file/field and the fix)."""

    exit_code = 1


class UsageError(ServeSystemError):
    """Bad arguments or bad input files."""

    exit_code = 2
