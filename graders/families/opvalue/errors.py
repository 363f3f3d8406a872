"""Exceptions of the operational-value grader; their text is the result's error message."""

from __future__ import annotations


class OperationalValueError(Exception):
    """A failure that makes the grader's result ``error`` with exactly this message."""


class SandboxUnavailableError(OperationalValueError):
    """bubblewrap is missing or cannot create the sandbox: we fail closed, never run unsandboxed."""
