"""One base error class and small subclasses.

Core code raises these; the CLI turns them into one-line messages and hook
bodies catch them so a memory failure never breaks the agent's turn.
"""


class MemtierError(Exception):
    """Base class of every error memtier raises on purpose."""


class ConfigError(MemtierError):
    """A config file or value is wrong: the message names the file and key."""


class LedgerError(MemtierError):
    """A ledger could not be read or written."""


class InvalidIdError(LedgerError, ValueError):
    """An id from a host or a record is not a plain name, so it can never become a path."""


class CorruptLineError(LedgerError):
    """One ledger line is not a valid record (reported, then skipped)."""

    def __init__(self, path, lineno: int, reason: str):
        self.path = path
        self.lineno = lineno
        self.reason = reason
        super().__init__(f"{path}:{lineno}: {reason}")


class ModelError(MemtierError):
    """The language-model endpoint failed or returned invalid output."""


class SearchIndexError(MemtierError):
    """The derived search index is unusable (it can always be rebuilt)."""


class EvalDataError(MemtierError):
    """Benchmark data is missing or malformed."""
