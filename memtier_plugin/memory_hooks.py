"""Deprecated path: ``memtier_plugin.memory_hooks`` is now ``memtier_plugin.scheduling.hooks`` (removed in 0.3).

This module is the new one under its old name, so attributes, ``isinstance`` checks and
monkeypatching behave as before; importing it warns once with DeprecationWarning.
"""

import sys
import warnings

from .scheduling import hooks as _moved

warnings.warn("memtier_plugin.memory_hooks moved to memtier_plugin.scheduling.hooks; the old path goes in memtier 0.3",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _moved
