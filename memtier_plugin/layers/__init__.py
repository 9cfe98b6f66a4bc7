"""MemSidecar §3.2: the Global layer (the user's standing knowledge, every project) and the Workspace layer (per project).

Config section: ``standing.*``.

Modules by purpose:

* extracting: :mod:`.extract` (preferences, constraints, rules and identity from the user's own
  words, one attribute each), :mod:`.forms` (the sentence forms it reads: one pattern per form, with the
  sentences each is for and is not), :mod:`.proposals` (what the configured model proposes, kept when it
  quotes the user), :mod:`.fragments` (what is said for good in a phrase: a label and what
  follows from it, "No spoilers, ever"), :mod:`.picks` (a preference revealed by a pick among offered options),
  :mod:`.session` (a session's or run's candidates, a list's scope carried to its continuation),
  :mod:`.gate` (the learned gate: a sentence the rules pass over, read by a model over its embedding);
* holding: :mod:`.topics` (the topic tree routing knowledge), :mod:`.implications` (what an item bears
  on by world knowledge: a tree-nut allergy on "a dairy-free milk"), :mod:`.global_layer`
  (``global/knowledge.jsonl``: nodes, retirement by attribute), :mod:`.workspace_layer`
  (``procedural/<project>.jsonl`` skills, ``state/<project>.jsonl`` working state);
* reading a rule: :mod:`.rules` (what a standing rule bounds: action, days, time, amount,
  production; the one grammar Hooks and the pre-commit check share);
* delivering: :mod:`.standing` (the items in scope, what applies to this prompt, with no time decay),
  :mod:`.requests` (whether a prompt asks for a choice, which calibration reads), :mod:`.asking` (the
  request model: what the request rules' forms miss, read from the prompt's vector), :mod:`.center` (the
  common direction of prompts, taken out of a prompt's vector before it is compared with the items);
* maintaining: :mod:`.maintain` (the one path the hooks and the daemon share: extraction at task
  boundaries, skills, working state, revised labels).

Entry points: :class:`.global_layer.GlobalStore`, :class:`.standing.StandingScorer`.
"""
