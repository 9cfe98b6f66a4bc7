"""Maintaining the layers: the one path the hooks (at task boundaries) and the daemon (per batch) share.

MemSidecar §3.2: at a task boundary the user's words become standing knowledge
(:func:`maintain`: rules always, the configured model too when
``standing.extractor: model``, its output validated data), a successful run
becomes a skill and the working state is written (:func:`task_boundary`). What
memory derives from a written node (its Hooks: scheduling/derived.py) is stored
here too, through the ``derive`` callback the facade passes (this room cannot
import scheduling).
Delivered episodes whose standing knowledge was revised since are labelled
(:func:`mark_revised`), so an old value is never delivered as current.
"""

from __future__ import annotations

import functools
import logging
import time

log = logging.getLogger(__name__)


def maintain(global_store, messages: list[tuple[str, str, str]], *, config, client=None, agent_id: str,
             session_id: str, project: str, ts: float, derive=None, earlier=None, gate=(None, None)) -> list[dict]:
    """The Global layer from one session's ``messages`` ((entry id, role, text), in order): extract, dedupe,
    upsert. ``client``: the chat model, asked when ``standing.extractor`` is ``model``. ``derive(records,
    ts)``: called with the records written, to store what memory derives from them beside them (the facade
    passes the Hooks a rule proposes: scheduling/derived.py); its failure is logged, the knowledge stays.
    ``earlier``: the session's messages (or a function reading them), read only when a candidate has no stated
    scope and the run may continue a list said before it. ``gate``: (the learned standing gate, the embedder it
    reads), asked about the user sentences the rules pass over (layers/gate.py). The records written."""
    if not config.standing.enabled or not messages:
        return []
    from .proposals import model_candidates
    from .session import from_session

    candidates = from_session(messages)
    if earlier is not None and any(not c.requests for c in candidates):
        # a run answering "Anything else I should know?" adds to a list a run before it began
        ids = {m[0] for m in messages}
        candidates = from_session(messages, before=[m for m in (earlier() if callable(earlier) else earlier)
                                                    if m[0] not in ids])
    if gate[0] is not None:
        try:  # what the rules pass over, read by the learned gate; rules stay the floor
            from .gate import candidates as gated

            candidates += gated(messages, gate[0], gate[1])
        except Exception as exc:
            log.warning("the standing gate failed (%s); rules only", exc)
    if client is not None and config.standing.extractor == "model":
        try:  # the model proposes too; rules stay the floor
            deadline = time.monotonic() + config.model.hook_deadline_s
            candidates += model_candidates(client, messages, deadline=deadline)
        except Exception as exc:
            log.warning("model extraction of standing knowledge failed (%s); rules only", exc)
    from .picks import said_more

    written = global_store.upsert(said_more(candidates), agent_id=agent_id, session_id=session_id, project=project,
                                  ts=ts)
    if written and derive is not None:
        try:
            derive(written, ts)
        except Exception:
            log.exception("deriving hooks from %d written records failed; the knowledge is kept", len(written))
    return written


def task_boundary(global_store, skills, state_ledger, messages: list[tuple[str, str, str]], calls: list[dict], *,
                  config, client=None, success: bool, run_id: str, agent_id: str, session_id: str, project: str,
                  ts: float, earlier=(), derive=None, gate=(None, None)) -> None:
    """agent_end maintenance: standing knowledge from the run's words; a skill from a successful run (its
    goal the task it achieved, looked for in ``earlier``, the session's messages or a function reading them,
    when the run only acknowledges: workspace_layer.skill_goal); the working state (the last reply and the
    calls). ``derive``, ``gate``: as for :func:`maintain`."""
    if not config.standing.enabled:
        return
    from .workspace_layer import learn_skill, record_state, skill_goal

    if callable(earlier):
        earlier = functools.cache(earlier)  # read once, by whichever needs it first
    maintain(global_store, messages, config=config, client=client, agent_id=agent_id, session_id=session_id,
             project=project, ts=ts, derive=derive, earlier=earlier, gate=gate)
    goal = skill_goal(messages, earlier, calls) if success and calls else ""
    if goal:  # no task found (a run of acknowledgements only): no skill
        skill = learn_skill(skills, goal=goal, calls=calls, run_id=run_id, session_id=session_id, agent_id=agent_id,
                            entry_ids=[m[0] for m in messages], ts=ts)
        if skill is not None and derive is not None:
            try:  # the hook its precondition implies, stored beside it
                derive([skill], ts)
            except Exception:
                log.exception("deriving hooks from skill %s failed; the skill is kept", skill["id"])
    last = next((m[2] for m in reversed(messages) if m[1] == "assistant"), "")
    if last or calls:
        record_state(state_ledger, session_id=session_id, progress=last, calls=calls, ts=ts)


def mark_revised(global_store, hits) -> None:
    """Label delivered episodes whose standing knowledge was revised since (their old value is not current)."""
    revised = global_store.revised_sources()
    for hit in hits:
        if not hit.standing:
            hit.revised_by = next((revised[s] for s in hit.sources if s in revised), "")
