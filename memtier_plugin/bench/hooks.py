"""`memtier bench sidecar`: the time of one pre_tool hook decision with N bound hooks (issue 13).

For each N, writes N hooks of a realistic mix (below) to ``memory/hooks/`` of a
temporary workspace, loads them through :class:`HookScheduler` as the plugin
would, then times ``deliver("pre_tool", …)`` for proposed tool calls drawn from
a fixed pool of tools, arguments and states, each in a new task (so no hook is
left out for having fired: the worst case of a task's first call). The
reference, timed in the same run on the same calls, is ``json.dumps`` of the
call's params: the cost of merely serialising the call once.

The mix: 55% bound to one tool with argument tests; 15% to a few tools with a
regex or a weekday; 10% listening to queries only; 10% tool-agnostic state
hooks (project and an argument present); 5% rule-like hooks (a tool-name regex
or a shell command, production, weekend); 5% nested all/any/not. Tool-agnostic
hooks are evaluated at every call; the others only for their tools.

An adversarial row measures one event whose candidate hooks all run
worst-case regexes over a long argument: the step budget stops it, and its
time is the bound a hostile hooks file can impose on one call.
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
import time
from pathlib import Path

import yaml

from ..scheduling.hooks import EVENT_STEPS, HookScheduler

TARGET_P99_MS = 1.0  # issue 13: pre_tool decision p99 <= 1 ms with 1,000 bound hooks (no model)
TOOLS = ["deploy", "schedule_deploy", "ssh", "bash", "book_hotel", "book_flight", "send_email", "read_file",
         "write_file", "git_push", "git_merge", "http_get", "select_option", "delete_file", "db_query"] + \
        [f"tool_{i}" for i in range(105)]
WORDS = ["deploy", "hotel", "budget", "invoice", "review", "runbook", "payments", "legacy", "refund", "migration",
         "flight", "vegetarian", "notion", "obsidian", "backup", "release", "ssh", "database", "report", "weekend"]
PROJECTS = [f"project-{i}" for i in range(20)]
DAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
ENVS = ["production", "staging", "dev"]


def _hook(i: int, rng: random.Random) -> dict:
    r = rng.random()
    tool = rng.choice(TOOLS)
    entry = f"Bench memory entry {i}: " + " ".join(rng.choice(WORDS) for _ in range(12))
    if r < 0.55:
        leaf = rng.choice([{"arg": {"path": "env", "equals": rng.choice(ENVS)}},
                           {"arg": {"path": "command", "contains": rng.choice(WORDS)}},
                           {"arg": {"path": "price", "gt": rng.randint(50, 500)}},
                           {"arg": {"path": "target.host", "in": [f"host-{rng.randint(0, 9)}", "pay-legacy-1"]}}])
        when = {"all": [{"tool": tool}, leaf]}
        events = ["pre_tool"]
    elif r < 0.70:
        when = {"all": [{"tool": {"in": rng.sample(TOOLS, 3)}},
                        {"any": [{"arg": {"path": "command", "matches": rf"\b{rng.choice(WORDS)}\b"}},
                                 {"state": {"key": "weekday", "in": rng.sample(DAYS, 2)}}]}]}
        events = ["pre_tool"]
    elif r < 0.80:
        when = {"query": {"any": rng.sample(WORDS, 2)}}
        events = ["query"]
    elif r < 0.90:
        when = {"all": [{"state": {"key": "project", "equals": rng.choice(PROJECTS)}},
                        {"arg": {"path": rng.choice(["env", "path", "price"]), "exists": True}}]}
        events = ["pre_tool"]
    elif r < 0.95:
        fam = rng.choice(["deploy|release|rollout", "ssh|connect", "book|reserv|hotel"])
        when = {"all": [{"any": [{"tool": {"matches": fam}}, {"arg": {"path": "command", "matches": fam}}]},
                        {"arg": {"path": "env", "matches": "prod"}},
                        {"state": {"key": "weekday", "in": ["Sat", "Sun"]}}]}
        events = ["pre_tool"]
    else:
        when = {"all": [{"tool": tool},
                        {"any": [{"not": {"phase": rng.choice(["plan", "review"])}},
                                 {"all": [{"state": {"key": "hour", "ge": 18}}, {"arg": {"path": "env", "exists": True}}]}]},
                        {"not": {"arg": {"path": "dry_run", "equals": True}}}]}
        events = ["pre_tool", "post_tool"]
    return {"id": f"h{i}", "entry": entry, "events": events, "when": when}


def hook_mix(n: int, seed: int = 0) -> list[dict]:
    """``n`` hooks of the mix above, as the data a hooks file holds."""
    rng = random.Random(seed)
    return [_hook(i, rng) for i in range(n)]


def proposed_calls(k: int, seed: int = 1) -> list[tuple[str, dict, dict, str]]:
    """``k`` (tool, params, state, query) tuples: a third on the ten common tools, the rest on any."""
    rng = random.Random(seed)
    out = []
    for _ in range(k):
        tool = rng.choice(TOOLS[:10]) if rng.random() < 0.33 else rng.choice(TOOLS)
        command = " ".join(rng.choice(WORDS + ["--force", "-v", "/srv/app", "prod"]) for _ in range(rng.randint(8, 40)))
        params = {"env": rng.choice(ENVS), "command": command, "price": rng.randint(20, 800),
                  "target": {"host": f"host-{rng.randint(0, 12)}"}, "path": f"/srv/{rng.choice(WORDS)}.txt"}
        state = {"weekday": rng.choice(DAYS), "hour": rng.randint(0, 23), "project": rng.choice(PROJECTS),
                 "phase": rng.choice(["plan", "act", "review"]), "agent": "bench"}
        query = " ".join(rng.choice(WORDS) for _ in range(12))
        out.append((tool, params, state, query))
    return out


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round((len(s) - 1) * q)))]


def write_hooks(root: Path, hooks: list[dict], per_file: int = 1000) -> Path:
    """The hooks as YAML files under ``root/memory/hooks`` (at most ``per_file`` a file); returns the folder."""
    folder = root / "memory" / "hooks"
    folder.mkdir(parents=True, exist_ok=True)
    for f, start in enumerate(range(0, max(len(hooks), 1), per_file)):
        (folder / f"bench-{f:03d}.yaml").write_text(yaml.safe_dump({"hooks": hooks[start:start + per_file]},
                                                                   sort_keys=False))
    return folder


def _time_calls(sched: HookScheduler, calls, warmup: int) -> tuple:
    """(decision wall ms, decision CPU ms, reference ms, predicates evaluated) per call, and entries delivered."""
    for i, (tool, params, state, query) in enumerate(calls[:warmup]):
        sched.deliver("pre_tool", state, tool_name=tool, params=params, query=query, task_key=f"warm-{i}")
        json.dumps(params)
    times, cpu, refs, evaluated, delivered = [], [], [], [], 0
    wall, thread = time.perf_counter_ns, time.thread_time_ns
    for i, (tool, params, state, query) in enumerate(calls):
        c0, t0 = thread(), wall()
        out = sched.deliver("pre_tool", state, tool_name=tool, params=params, query=query, task_key=f"task-{i}")
        t1, c1 = wall(), thread()
        json.dumps(params)
        t2 = wall()
        times.append((t1 - t0) / 1e6)
        cpu.append((c1 - c0) / 1e6)
        refs.append((t2 - t1) / 1e6)
        evaluated.append(out.evaluated)
        delivered += len(out.matches)
    return times, cpu, refs, evaluated, delivered


def bench_hooks(n: int, *, calls: int = 3000, seed: int = 0, workdir: Path | None = None) -> dict:
    """One row: load time and pre_tool decision p50/p95/p99 with ``n`` hooks, beside the reference."""
    base = Path(tempfile.mkdtemp(prefix="memtier-sidecar-", dir=workdir))
    try:
        folder = write_hooks(base, hook_mix(n, seed))
        sched = HookScheduler(folder, refresh_s=3600.0)
        t0 = time.perf_counter()
        sched.refresh()
        load_s = time.perf_counter() - t0
        if sched.problems or len(sched.hooks) != n:
            raise RuntimeError(f"bench hooks did not load: {sched.problems or len(sched.hooks)}")
        times, cpu, refs, evaluated, delivered = _time_calls(sched, proposed_calls(calls, seed + 1),
                                                             warmup=min(300, calls))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    ref_p50 = _pct(refs, 0.5)
    row = {"hooks": n, "calls": calls, "load_s": load_s,
           "p50_ms": _pct(times, 0.5), "p95_ms": _pct(times, 0.95), "p99_ms": _pct(times, 0.99),
           "max_ms": max(times), "cpu_p50_ms": _pct(cpu, 0.5), "cpu_p95_ms": _pct(cpu, 0.95),
           "cpu_p99_ms": _pct(cpu, 0.99), "ref_json_dumps_p50_ms": ref_p50,
           "p50_over_ref": _pct(times, 0.5) / ref_p50 if ref_p50 else None,
           "p99_over_ref": _pct(times, 0.99) / ref_p50 if ref_p50 else None,
           "evaluated_mean": sum(evaluated) / len(evaluated), "evaluated_max": max(evaluated),
           "delivered_per_call": delivered / calls}
    return row


def bench_adversarial(*, hooks: int = 200, repeats: int = 30) -> dict:
    """One event on which every candidate hook runs worst-case regexes over a long argument."""
    pattern = r"a[a-z]*b<i>"  # one unbounded repeat: the costliest shape accepted; distinct, so none is shared
    data = [{"id": f"x{i}", "entry": f"adversarial {i}", "events": ["pre_tool"],
             "when": {"all": [{"tool": "bash"}, {"arg": {"path": "command", "matches": pattern.replace("<i>", str(i))}}]}}
            for i in range(hooks)]
    base = Path(tempfile.mkdtemp(prefix="memtier-sidecar-adv-"))
    try:
        sched = HookScheduler(write_hooks(base, data), refresh_s=3600.0)
        sched.refresh()
        params = {"command": "a" * 100_000}
        times, skipped, evaluated, steps = [], 0, 0, 0
        for i in range(repeats):
            t0 = time.perf_counter_ns()
            out = sched.deliver("pre_tool", {}, tool_name="bash", params=params, task_key=f"adv-{i}")
            times.append((time.perf_counter_ns() - t0) / 1e6)
            skipped, evaluated, steps = len(out.skipped), out.evaluated, out.steps
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return {"hooks": hooks, "pattern": pattern, "argument_chars": 100_000, "evaluated": evaluated,
            "skipped_by_budget": skipped, "steps": steps, "event_steps_budget": EVENT_STEPS,
            "p50_ms": _pct(times, 0.5), "max_ms": max(times)}


# ---- the model path: the whole pre_tool with the learned policy -------------------------------------
PREFERENCES = [
    "I avoid seafood, so never suggest shrimp, oysters or fish dishes to me.",
    "I have a fear of heights, so I stay away from rooftop bars, cable cars and observation decks.",
    "I dislike horror films and anything with graphic violence.",
    "I prefer quiet hotels within walking distance of the venue, under 180 euros a night.",
    "I can't stand long layovers; direct flights only, please.",
]
TASKS = [
    ("Recommend a dish for tonight's team dinner.",
     ["grilled shrimp skewers", "wild mushroom risotto", "oysters on ice", "seared salmon with fennel"]),
    ("Plan an evening out in Lisbon for the team.",
     ["a rooftop bar with views over the city", "a fado show in Alfama", "the Santa Justa lift at sunset",
      "a cable car ride over Parque das Nações"]),
    ("Pick a film for Friday's movie night.",
     ["a slasher horror film", "a light romantic comedy", "a gory zombie thriller", "a war film with graphic battles"]),
    ("Book a hotel for the offsite in Porto.",
     ["a boutique hotel 5 minutes' walk from the venue, 150 euros", "a party hostel near the clubs",
      "a resort 40 minutes away by car", "a luxury suite at 420 euros a night"]),
    ("Book the flights to Berlin for the conference.",
     ["a direct flight landing at 11:00", "a flight with a 7-hour layover in Istanbul",
      "an overnight flight with two stops", "a cheap flight with a 5-hour layover"]),
]


def bench_policy(n: int, *, tasks: int = 20, seed: int = 0, policy_file: Path | None = None,
                 workdir: Path | None = None) -> dict:
    """One row of the model path: the whole pre_tool through the reference host (fixed rule, ``n`` bound
    hooks, then the learned policy over its features, with the standing embedder when there is one) for
    ``tasks`` tasks of four ``select_option`` calls each, every task a new session (its first call embeds
    the request and the evidence's clauses; the next three find them cached). ``policy_file``: a policy of
    ``memtier train policy``; by default a zero-weight policy over the evidence features (its time does not
    depend on its weights)."""
    from .. import plugin
    from ..events import AgentEndEvent, HookContext, PromptEvent, SessionEndEvent, ToolCallEvent
    from ..host import Host
    from ..memory import memory_for, reset_services
    from ..intervention.policy import EVIDENCE_FEATURES, FEATURES, Policy, write_policy

    base = Path(tempfile.mkdtemp(prefix="memtier-sidecar-policy-", dir=workdir))
    rng = random.Random(seed * 1_000_003 + n)  # each row its own texts (vectors are cached per process)
    try:
        write_hooks(base, hook_mix(n, seed))
        pol = base / "memtier-policy.yaml"
        if policy_file is None:
            write_policy(pol, Policy.zero(names=FEATURES + EVIDENCE_FEATURES))
        else:
            shutil.copyfile(policy_file, pol)
        (base / "memtier.yaml").write_text("scheduling:\n  mode: combined\n  policy: memtier-policy.yaml\n")
        reset_services()
        host = Host()
        host.register(plugin, "memtier")

        def ctx(i: int) -> HookContext:
            return HookContext(agent_id="bench", session_id=f"s{i}", run_id=f"r{i}", project="bench",
                               workspace_dir=str(base))

        for i, text in enumerate(PREFERENCES):  # the standing layer: what the user said once
            host.before_prompt_build(PromptEvent(text), ctx(-1 - i))
            host.agent_end(AgentEndEvent(success=True), ctx(-1 - i))
            host.session_end(SessionEndEvent(reason="completed"), ctx(-1 - i))
        mem = memory_for(ctx(0))
        timeout_ms = mem.config.scheduling.policy_timeout_ms
        embedder = getattr(mem.scorer.embedder, "name", "") if mem.scorer.embedder is not None else ""
        times, first, actions, timeouts, checked = [], [], {}, 0, 0
        for t in range(-1, tasks):  # task -1 warms up (models loaded, the evidence's clauses embedded)
            request, options = TASKS[t % len(TASKS)]
            words = " ".join(rng.sample(WORDS, 2))  # new texts every task: nothing embedded yet
            request = f"{request} Task {t}: {words}."
            host.before_prompt_build(PromptEvent(request), ctx(t))
            for k, option in enumerate(rng.sample(options, len(options))):
                option = f"{option} ({rng.choice(WORDS)} {t}-{k})"
                call = ToolCallEvent("select_option", {"request": request, "option": option}, f"c{t}-{k}")
                t0 = time.perf_counter_ns()
                host.pre_tool(call, ctx(t))
                ms = (time.perf_counter_ns() - t0) / 1e6
                if t < 0:
                    continue
                times.append(ms)
                if k == 0:
                    first.append(ms)
                d = mem.last_decision
                action = d.action if d is not None else "?"
                actions[action] = actions.get(action, 0) + 1
                timeouts += bool(d is not None and d.features.get("policy_timeout"))
                checked += bool(d is not None and "policy_features" in d.features)
            host.session_end(SessionEndEvent(reason="completed"), ctx(t))
        mem.close()
    finally:
        reset_services()
        shutil.rmtree(base, ignore_errors=True)
    return {"hooks": n, "path": "policy", "calls": len(times), "p50_ms": _pct(times, 0.5),
            "p95_ms": _pct(times, 0.95), "p99_ms": _pct(times, 0.99), "max_ms": max(times),
            "first_call_p50_ms": _pct(first, 0.5), "first_call_p95_ms": _pct(first, 0.95),
            "policy_timeout_ms": timeout_ms, "timeouts": timeouts, "over_timeout": sum(t > timeout_ms for t in times),
            "actions": actions, "policy_checked": checked, "standing_embedder": embedder or "none (lexical features)",
            "policy": str(policy_file) if policy_file else "zero weights over the evidence features"}


def check(rows: list[dict]) -> list[tuple[str, bool]]:
    """Verdicts on the issue-13 target for the measured sizes of at least 1,000 hooks.

    Judged on the thread's CPU time, which excludes the time the OS gave other
    processes (on a shared machine that dominates the wall-time tail); the wall
    p99 is shown beside it.
    """
    return [(f"p99 ≤ {TARGET_P99_MS:g} ms with {r['hooks']:,} hooks: CPU {r['cpu_p99_ms']:.3f} ms "
             f"(wall {r['p99_ms']:.3f} ms)", r["cpu_p99_ms"] <= TARGET_P99_MS)
            for r in rows if r["hooks"] >= 1000]
