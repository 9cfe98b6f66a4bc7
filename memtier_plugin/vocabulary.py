"""The papers' words, defined once: a newcomer reads this module as the glossary.

Values only (tuples of names); each is the spelling on disk, in the config and
in the host contract, so none of them ever changes.
"""

from __future__ import annotations

#: MemTier §3.1: the tiers of memory. Order is the index's tier code (0, 1, 2).
TIERS = ("episodic", "semantic", "procedural")
#: MemSidecar §3.2: the layers of standing knowledge (the Global layer is the user's; the Workspace
#: layer is a project's, its skills held in the procedural tier).
LAYERS = ("global", "workspace")
#: Where a standing item lives (``Hit.tier`` of a standing hit): the Global layer, or the procedural tier.
STANDING_TIERS = ("global", "procedural")
#: What Foresight's predictions may target (MemSidecar eq. 11): the tiers recall reads and the Global layer.
PREDICTION_TARGETS = ("episodic", "semantic", "global", "procedural")
#: Who wrote an episodic entry. The index adds "fact" for semantic facts (its role column).
ROLES = ("user", "assistant", "tool", "system")
INDEX_ROLES = (*ROLES, "fact")
#: MemTier eq. 1: the five retrieval signals, in the order of every weight vector.
SIGNALS = ("sem", "bm25", "decay", "cw", "tier")
#: Pulse §3.3: what the pre-commit check does with a proposed call.
ACTIONS = ("silent", "supplement", "intervene")
#: MemSidecar §3.2: kinds of Global-layer knowledge nodes, and of semantic facts (MemTier §3.3).
# "pick": a bare pick of an offered option (layers/picks.py), delivered only to a prompt that asks for a choice
NODE_KINDS = ("preference", "constraint", "rule", "identity", "choice", "pick")
FACT_KINDS = ("preference", "constraint", "decision", "attribute", "event", "progress", "plan")
#: The host's hooks (hookspecs.py), in the order of one turn.
HOOK_NAMES = ("before_prompt_build", "pre_tool", "post_tool", "agent_end", "before_compaction", "session_end")
#: MemSidecar §3.3: the events a Hook listens to.
HOOK_EVENTS = ("query", "pre_tool", "post_tool")
#: The named presets of the config (config.PRESETS holds what each sets).
PRESET_NAMES = ("paper", "recommended", "hybrid", "hybrid-fast")
#: Weekdays as the hooks' state and the rules read them (``%a`` in English).
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
