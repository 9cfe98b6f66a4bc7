"""MemSidecar §3.3–3.4: when memory is delivered unasked — Hooks at an event, Foresight ahead of time.

Config sections: ``hooks.*`` (Hooks), ``foresight.*`` (Foresight) and ``step.*`` (memory for the step).

Modules by purpose:

* Hooks: :mod:`.predicates` (the predicate language: data, never code), :mod:`.safe_regex` (its
  regexes: a safe subset with a bound on backtracking work), :mod:`.rule_hooks` (hooks proposed from a
  standing rule or by the model, checked as data), :mod:`.derived` (the hooks proposed when memory is
  written, stored beside the node in ``memory/hooks/.derived/``, retired with it),
  :mod:`.hooks` (hook files, the scheduler firing each hook at most once per task, the block);
* Foresight: :mod:`.predict` (the instruction and the topic directory → predicted queries),
  :mod:`.foresight` (preparing them in the background into a task's cache, serving a match);
* Memory for the step: :mod:`.step` (a tool result retrieved on in the background, on Foresight's thread,
  delivered once at the agent's next decision).

Entry points: :class:`.hooks.HookScheduler`, :class:`.foresight.Foresight`, :class:`.step.StepRecall`.
"""
