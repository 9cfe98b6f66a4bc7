"""Pulse's pre-commit decision (§3.3–3.4): one proposed call → silent, supplement or intervene.

The fixed rule (:func:`.rules.decide`) sees the call, the task's words, the
standing items that apply (scored lexically: pre_tool stays well under a
millisecond) and the earlier identical calls that failed. When it does not
hold the call, the learned policy decides (:meth:`PreCommit.decide`), within
``scheduling.policy_timeout_ms``: the file ``scheduling.policy`` names, else the
one memtier ships (``none``: the fixed rule alone). The shipped policy reads
the bge-small embedder; where ``standing.embedder`` does not give it, the fixed
rule decides and one info line says so (a user's own file is refused with an
error line instead).
A hold of the fixed rule stands whatever the policy file says (the file is not
even read then). A policy that cannot be used is refused once, with one logged
line, and the fixed rule decides; the refusal is remembered until the file
changes (path, mtime, size), so a refused file is not parsed at every call. A
policy check that fails, times out or gives probabilities that are not finite
numbers never turns into a silent allow: it supplements the call with a note
that the check did not run.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

from ..errors import ConfigError
from ..events import ToolDecision
from ..store.tool_entries import call_prefix
from ..redact import redact
from . import features as policy_features, policy as learned  # by module: looked up at each call
from .rules import CHECKED_KINDS, Decision, Evidence, computable, decide

log = logging.getLogger(__name__)
BOUND_HEADER = "[memtier] bound memory for this call:"
HOOK_HOLD = "[memtier] held: this call breaks a standing rule that a hook binds to it (docs/hooks_memory.md)"


def bounded(fn: Callable[[], Any], timeout_s: float) -> Any:
    """``fn()``'s value, or None when it has not returned within ``timeout_s`` (it then runs on, in a daemon
    thread, and nothing waits for it); its exception is raised here."""
    box: list = []

    def run():
        try:
            box.append((True, fn()))
        except BaseException as exc:  # handed to the caller
            box.append((False, exc))

    worker = threading.Thread(target=run, name="memtier-policy", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if not box:
        return None
    ok, value = box[0]
    if not ok:
        raise value
    return value


def tool_decision(decision: Decision | None, bound: str, held: bool = False) -> ToolDecision | None:
    """What pre_tool answers the host: a hold, a supplement (with what bound Hooks deliver), or None.
    ``held``: a hook derived from a standing rule holds for this call (its entry is in ``bound``); a hold names
    what bound Hooks deliver too."""
    if (decision is not None and decision.action == "intervene") or held:
        parts = [decision.text()] if decision is not None and decision.action == "intervene" else [HOOK_HOLD]
        if bound:
            parts.append(f"{BOUND_HEADER}\n{bound}")
        return ToolDecision(block=True, block_reason=redact("\n".join(parts))[0])
    parts = [decision.text()] if decision is not None and decision.action == "supplement" else []
    if bound:
        parts.append(f"{BOUND_HEADER}\n{bound}")
    return ToolDecision(supplement=redact("\n".join(parts))[0]) if parts else None


class PreCommit:
    """The pre-commit check of one workspace.

    ``items(project, ts)``: the standing items in scope; ``lexical()`` and ``scorer()``: the standing
    scorers without and with the embedder; ``history(prefix, agent_id)``: (time, id, text) of the tool
    entries ``agent_id`` may read that start with ``prefix``, oldest first.
    """

    def __init__(self, config, *, items: Callable, lexical: Callable, scorer: Callable, history: Callable):
        self.config = config
        self._items, self._lexical, self._scorer, self._history = items, lexical, scorer, history
        self._policy_error = ""  # the last scheduling.policy problem logged (logged once, not per call)

    @property
    def enabled(self) -> bool:
        return self.config.scheduling.mode in ("intervention", "combined") and self.config.standing.enabled

    def decide(self, tool: str, params: dict, *, task: str, state, project: str, agent_id: str, ts: float,
               collect_features: bool = False, collect_pairs: bool = False, collect_judge: bool = False) -> Decision:
        """The decision for one proposed call; ``state.standing_task`` caches the policy's evidence per task.
        ``collect_*``: evaluation and training trace the policy's features without a policy."""
        items = self._items(project, ts)
        scored = [(it, s) for it, s, _ in self._lexical().score(f"{tool.replace('_', ' ')} {task[-500:]}", items)]
        decision = decide(tool, params, ts=ts, task_text=task, standing=scored,
                          failures=self.failures(tool, params, agent_id))
        if decision.action == "intervene":  # the fixed rule's hold stands: no policy file is even looked at
            return decision
        policy = self.policy
        if policy is not None or collect_features:
            decision = self._learned(decision, policy, tool, params, task, project, state, ts, collect_pairs,
                                     collect_judge)
        return decision

    def failures(self, tool: str, params: dict, agent_id: str) -> list[Evidence]:
        """Earlier identical calls (tool and arguments) that failed and never succeeded since."""
        prefix = call_prefix(tool, params)
        out: list[Evidence] = []
        for _ts, eid, content in self._history(prefix, agent_id):
            if content[len(prefix):].startswith("FAILED"):
                out.append(Evidence(eid, content[:300], "failure", "the same call failed"))
            else:
                out = []  # a later success of the same call: the failure is history
        return out

    @property
    def policy(self):
        """The learned policy ``scheduling.policy`` names (unset: the shipped default), or None: ``none``, or
        unusable (logged once)."""
        path = learned.policy_path(self.config)
        if path is None:
            return None
        try:
            pol = learned.load_policy(path)  # a refused file is refused from the cache until it changes
        except (ConfigError, OSError) as exc:
            return self._refused(str(exc))
        except Exception as exc:  # a reader bug: the file is unusable, the fixed rule decides (never a crash)
            return self._refused(f"{path}: cannot be used ({type(exc).__name__}: {exc})"[:500])
        emb = self._scorer().embedder
        if pol.embedder and getattr(emb, "name", "") != pol.embedder:
            if learned.is_default(path):  # no model fetched (or standing.embedder: none): not a misconfiguration
                return self._refused(f"the default intervention policy reads the {pol.embedder} embedder, which "
                                     "standing.embedder does not give here (`memtier model setup --embedder`; "
                                     "`scheduling.policy: none` turns it off)", level=logging.INFO)
            return self._refused(f"{path}: trained with the {pol.embedder} embedder, which "
                                 "standing.embedder does not give here")
        if pol.uses_pairs:
            from ..recall.rerank import SETUP_HINT, CrossEncoder, model_folder

            if not CrossEncoder(model_folder(self.config.rerank.model_dir)).available():
                return self._refused(f"{path}: reads cross-encoder features and the cross-encoder is not "
                                     f"set up ({SETUP_HINT})")
        if pol.uses_judge and (why := self._judge_missing()):
            return self._refused(f"{path}: reads the judge's features and {why}")
        return pol

    def _judge_missing(self) -> str:
        """Why the pair model cannot be read here ("" when it can: ``scheduling.judge`` auto and fetched)."""
        from ..models.judge import SETUP_HINT, Judge, model_folder

        if self.config.scheduling.judge == "none":
            return "scheduling.judge is none"
        if not Judge(model_folder(self.config.scheduling.judge_model_dir)).available():
            return f"the judge is not set up ({SETUP_HINT})"
        return ""

    def _judged(self, feats: dict, params: dict, task: str, scored: list, names: tuple, budget_s: float | None):
        """(``feats`` with the judge's ``names``, "") or (``feats``, why not: judge_timeout / judge_error /
        judge_unavailable) within ``budget_s`` (what the policy's timeout left; None: no bound, for tracing). Its
        work (the model's first load too) goes on aside past it: the scores are cached for the next call."""
        from ..models.judge import shared_judge

        call, request = policy_features.call_text(params, task), task[-500:]

        def work():
            judge = shared_judge(self.config.scheduling.judge_model_dir)
            return "judge_unavailable" if judge is None else \
                policy_features.judge_features(judge, call, request, scored, feats, names)

        try:
            got = work() if budget_s is None else bounded(work, budget_s) if budget_s > 0 else None
        except Exception:
            log.exception("memtier judge failed; the call is decided without it")
            return feats, "judge_error"
        if isinstance(got, str):
            return feats, got
        return ({**feats, **got}, "") if got is not None else (feats, "judge_timeout")

    def _without_judge(self):
        """The policy that decides when a judge policy's scores are missing: the shipped default (it reads no
        judge), when the standing embedder gives what it reads; else None (the fixed rule)."""
        try:
            pol = learned.load_policy(learned.DEFAULT_POLICY)
        except (ConfigError, OSError):
            return None
        return pol if not pol.embedder or getattr(self._scorer().embedder, "name", "") == pol.embedder else None

    def _refused(self, msg: str, level: int = logging.ERROR) -> None:
        if self._policy_error != msg:
            self._policy_error = msg
            log.log(level, "memtier scheduling.policy: %s; the fixed rule decides", msg)
        return None

    def _evidence(self, policy, params: dict, task: str, project: str, state, ts: float, collect_pairs: bool):
        """(the standing items that best apply to the task, the policy's features of this call)."""
        from ..recall.rerank import SETUP_HINT

        request = task[-500:]
        cached = state.standing_task
        if cached is None or cached[0] != request:
            items = [it for it in self._items(project, ts) if it.label in (*CHECKED_KINDS, "choice")]
            scored = [(it, s) for it, s, _ in self._scorer().score(request, items)] if request.strip() else []
            cached = state.standing_task = (request, scored[:4])
        pairs = policy.uses_pairs if policy is not None else collect_pairs
        ce = policy_features.pair_scorer(self.config.rerank.model_dir) if pairs else None
        if ce is None and policy is not None and policy.uses_pairs:
            raise RuntimeError("the policy reads cross-encoder features and the cross-encoder cannot run "
                               f"here ({SETUP_HINT})")
        wide = policy.uses_evidence if policy is not None else True  # tracing: every feature
        return cached[1], policy_features.features(policy_features.call_text(params, task), request, cached[1], self._scorer().embedder, ce,
                                   evidence=wide)

    def _learned(self, rule: Decision, policy, tool: str, params: dict, task: str, project: str, state, ts: float,
                 collect_pairs: bool, collect_judge: bool = False) -> Decision:
        """The learned policy's action for a call the fixed rule did not hold (Pulse §3.4). An explicit choice
        in the task (an argument its words name) is silent, as the fixed rule has it. A hold whose reason
        would be an item that gives no ground for one (:func:`_no_hold`) is a supplement. A failure keeps the
        fixed rule's hold or supplement, and turns its silence into a supplement (never a silent allow). A policy
        that reads the judge and gets no score from it in the time left decides as :meth:`_without_judge`."""
        try:
            timeout_ms = self.config.scheduling.policy_timeout_ms
            t0 = time.monotonic()
            done = bounded(lambda: self._evidence(policy, params, task, project, state, ts, collect_pairs),
                           timeout_ms / 1000.0)
            if done is None:  # still embedding: it finishes in the background (cached for the next call)
                log.warning("memtier intervention policy: no answer for %s within %.0f ms", tool, timeout_ms)
                return self._unchecked(rule, policy, f"the learned intervention check did not finish within "
                                                     f"{timeout_ms:.0f} ms: review this call against the user's "
                                                     "standing preferences before it commits", "policy_timeout")
            scored, feats = done
            if feats is None:
                return rule
            judge_miss = ""
            if policy.uses_judge if policy is not None else collect_judge:
                names = policy.names if policy is not None else policy_features.JUDGE_FEATURES
                left = timeout_ms / 1000.0 - (time.monotonic() - t0) if policy is not None else None  # tracing: all
                feats, judge_miss = self._judged(feats, params, task, scored, names, left)
                if judge_miss and policy is not None:  # decided as without the judge (never a missing feature)
                    policy = self._without_judge()
            explicit = policy_features.explicit_choice(params, task)
            out = {**rule.features, "rule_action": rule.action, "explicit_choice": explicit, "policy_features": feats}
            if judge_miss:
                out[judge_miss] = True
            if policy is None:
                return Decision(rule.action, rule.evidence, rule.reason, out)
            action, probs = policy.act(feats)
            if explicit:
                action = "silent"  # the task asks for this explicitly: a general habit neither holds nor nags
            elif action == "intervene" and (why := _no_hold(policy_features.conflicting_item(scored, feats, policy)[0],
                                                            scored)):
                action = "supplement"  # the item it would quote gives no ground for a hold: tell, do not hold
                out["no_hold"] = why
            out.update(policy=policy.source, policy_action=action, policy_probs=probs)
            return _quoting(action, scored, feats, policy, out)
        except Exception:
            log.exception("memtier intervention policy failed for %s", tool)
            return self._unchecked(rule, policy, "the learned intervention check failed for this call: review it "
                                                 "against the user's standing preferences before it commits",
                                   "policy_error")

    @staticmethod
    def _unchecked(rule: Decision, policy, text: str, flag: str) -> Decision:
        """With a policy set, a check that did not run says so in a supplement; otherwise the rule stands."""
        if policy is None or rule.action != "silent":
            return rule
        return Decision("supplement", [], text, {**rule.features, flag: True})


def _no_hold(first, scored: list) -> str:
    """Why the learned policy may not hold a call ("" when it may). ``first``: the item its hold would quote
    first; ``scored``: the evidence (item, applicability), best first. No hold when ``first`` bounds a day, a
    time or an amount (the fixed rule computes those, and let the call through: "never book flights before
    8am" does not hold a $165 hotel), nor when no item of the evidence (the top EVIDENCE_K) says something it
    avoids, outside such bounds ("I always want an aisle seat": the features cannot tell a call against it
    from one it does not bear on, as a deploy)."""
    if computable(first.content):
        return "bounds the fixed rule checks"
    if not any(policy_features.polarity(it.content)[0] and not computable(it.content)
               for it, _ in scored[:policy_features.EVIDENCE_K]):
        return "states nothing it avoids"
    return ""


def _quoting(action: str, scored: list, feats: dict, policy, features_: dict) -> Decision:
    """The policy's action as a Decision: a hold quotes first the item the call conflicts with (the evidence
    features' selection), then the one that applies best to the task; a supplement the other way round."""
    picked = [policy_features.conflicting_item(scored, feats, policy), scored[0]]
    picked = picked if action == "intervene" else picked[::-1]
    ev = [Evidence(it.id, it.content, it.label, f"applies to the task ({s:.2f})")
          for it, s in dict((it.id, (it, s)) for it, s in picked).values()]
    if action == "intervene":
        return Decision("intervene", ev, f"held: this call goes against a standing {ev[0].kind}", features_)
    if action == "supplement":
        return Decision("supplement", ev, "standing knowledge that applies to this call", features_)
    return Decision("silent", [], "", features_)


__all__ = ["PreCommit", "bounded", "tool_decision"]
