"""Deprecated path: ``memtier_plugin.ledger`` is now ``memtier_plugin.store.episodic`` (removed in 0.3).

This module is the new one under its old name, so attributes, ``isinstance`` checks and
monkeypatching behave as before; importing it warns once with DeprecationWarning.
"""

import sys
import warnings

from .store import episodic as _moved

warnings.warn("memtier_plugin.ledger moved to memtier_plugin.store.episodic; the old path goes in memtier 0.3",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _moved
