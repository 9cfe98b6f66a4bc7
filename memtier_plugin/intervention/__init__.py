"""Pulse §3.3–3.4: whether a proposed tool call commits — silent, supplement or intervene.

Config sections: ``scheduling.mode`` and ``scheduling.policy`` (the names predate this room).

Modules by purpose:

* :mod:`.rules`: the fixed rule (a standing rule the call breaks, a repeated failure) and the
  :class:`.rules.Decision` shape;
* :mod:`.features`: what the learned policy reads (a call against the standing items that apply);
* :mod:`.policy`: the learned policy (features → action) and its file;
* :mod:`.pre_commit`: the decision for one proposed call (the rule, then the policy within its
  timeout; a check that cannot run is never a silent allow) and the answer pre_tool gives the host.

Entry points: :class:`.pre_commit.PreCommit`, :func:`.rules.decide`, :func:`.policy.load_policy`.
"""
