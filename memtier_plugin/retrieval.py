"""Deprecated path: ``memtier_plugin.retrieval`` is now ``memtier_plugin.recall.retriever`` (removed in 0.3).

This module is the new one under its old name, so attributes, ``isinstance`` checks and
monkeypatching behave as before; importing it warns once with DeprecationWarning.
"""

import sys
import warnings

from .recall import retriever as _moved

warnings.warn("memtier_plugin.retrieval moved to memtier_plugin.recall.retriever; the old path goes in memtier 0.3",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _moved
