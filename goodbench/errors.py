"""The errors a user meets. The CLI prints a GoodbenchError as one line on stderr and exits 2; any
other exception is a bug in goodbench and keeps its traceback. Stdlib only: every layer may raise them."""

from __future__ import annotations


class GoodbenchError(Exception):
    """Something the user can fix; the message says what and where, on one line."""


class UsageError(GoodbenchError, ValueError):
    """A bad option or argument value: flags, SLO syntax, engine knobs, gate clauses."""


class InputError(GoodbenchError, ValueError):
    """An input file or dataset that cannot be read or is malformed (workload, trace, dataset,
    tokenizer, another tool's results); the message names the file and, where it can, the line or key."""


class RunDirError(GoodbenchError):
    """A results directory that cannot be read or written (missing, corrupt, already used, a full or
    read-only disk). summary: what the run measured before its results could not be written (the CLI
    prints it before the one-line error)."""

    def __init__(self, message: str, summary: dict | None = None):
        super().__init__(message)
        self.summary = summary


class TargetError(GoodbenchError):
    """The server under test: unreachable, failed to start, or died."""


class GoodbenchWarning(UserWarning):
    """Something the user should know before (or after) the run that does not stop it: a base URL
    corrected, class weights rescaled, trace rows that disagree with themselves. The CLI prints each as
    one line on stderr (`goodbench: warning: ...`); a library caller sees a Python warning."""


def warn(message: str) -> None:
    """Tell the user (GoodbenchWarning), pointing at the caller's caller."""
    import warnings

    warnings.warn(message, GoodbenchWarning, stacklevel=3)
