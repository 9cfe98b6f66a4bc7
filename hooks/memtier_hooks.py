"""Drop-in hook file: copy into your agent runtime's plugin directory.

A thin adapter: the runtime's PluginManager (project name "memtier") registers
this module, and every hook delegates to the installed ``memtier_plugin``
package. Requires ``pip install memtier-plugin``.
"""

from memtier_plugin.plugin import (  # noqa: F401  (re-exported hook implementations)
    agent_end,
    before_compaction,
    before_prompt_build,
    post_tool,
    pre_tool,
    session_end,
)

PLUGIN_NAME = "memtier"
