"""memtier: tiered memory for long-running agents.

Nothing happens at import time: no directories, no entry-point scans.
"""

__version__ = "0.1.0"
