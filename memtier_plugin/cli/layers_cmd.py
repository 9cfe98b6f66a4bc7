"""``memtier inspect topics``, ``workspace`` and ``hooks``: the standing layers and hooks, as a person reads them."""

from __future__ import annotations

import click

from .terminal import json_line, printable


def inspect_topics(state, as_json: bool, history: bool) -> None:
    """The Global layer: the topic tree with the knowledge nodes under each topic."""
    from ..layers.global_layer import GlobalStore
    from ..layers.topics import topic_tree

    store = GlobalStore(state.config.memory_root)
    store.refresh()
    nodes = list(store.nodes.values())
    for p in store.problems:
        click.echo(f"memtier: warning: skipped {printable(p)}", err=True)
    shown = [n for n in nodes if history or n.retired_by is None]
    if as_json:
        tree = topic_tree(state.config.memory_root)
        by_topic: dict[str, list[str]] = {}
        for n in shown:
            for t in n.rec.get("topics") or ["(no topic)"]:
                by_topic.setdefault(t, []).append(n.id)
        click.echo(json_line({"topics": {t: {"parents": tree.parents(t), "nodes": ids} for t, ids in sorted(by_topic.items())},
                              "nodes": [{**n.rec, "current": n.retired_by is None, "retired_by": n.retired_by}
                                        for n in shown]}))
        return
    if not shown:
        click.echo(f"no standing knowledge yet in {state.config.memory_root / 'global'}")
        return
    by_topic: dict[str, list] = {}
    for n in shown:
        for t in n.rec.get("topics") or ["(no topic)"]:
            by_topic.setdefault(t, []).append(n)
    for topic in sorted(by_topic):
        depth = topic.count("/")
        click.echo(printable(f"{'  ' * depth}{topic.split('/')[-1]}  ({topic})"))
        for n in by_topic[topic]:
            scope = (n.rec.get("applies") or {}).get("projects", "*")
            mark = "" if n.retired_by is None else f"  [retired by {n.retired_by}]"
            click.echo(printable(f"{'  ' * depth}  - {n.id} {n.rec['node_kind']}"
                                 f"{' · ' + n.rec['attribute'] if n.rec.get('attribute') else ''}"
                                 f" · projects {scope if scope == '*' else ','.join(scope)}{said_for(n.rec)}: "
                                 f"{n.rec['content'][:90]}{mark}"))


def said_for(rec: dict) -> str:
    """" · said for: anything you book for me" for a node with a stated scope, " · said when asked: ..." for one
    said choosing among offered options, else ""."""
    applies = rec.get("applies") or {}
    said, asked = applies.get("requests") or "", applies.get("asked") or ""
    return (f" · said for: {said}" if said else "") + (f" · said when asked: {asked[:60]}" if asked else "")


def inspect_workspace(state, projects: tuple[str, ...], as_json: bool, history: bool = False) -> None:
    """The Workspace layer of each project: its current skills (``history``: every revision too) and its
    latest working state."""
    from ..layers.workspace_layer import current_skills
    from ..memory import Memory

    mem = Memory(state.config)
    root = state.config.memory_root
    names = set(projects)
    if not names:
        names = {rec.get("project", "") for sub in ("procedural", "state") for p in
                 ((root / sub).glob("*.jsonl") if (root / sub).is_dir() else ())
                 for rec in _records(p)}
    out = {}
    for project in sorted(names):
        store = mem.workspace_store("procedural", project)
        skills = [r for r in store.refresh() if r.get("kind") == "skill"] if history else current_skills(store)
        states = [r for r in mem.workspace_store("state", project).refresh() if r.get("kind") == "state"]
        out[project] = {"skills": skills, "state": states[-1] if states else None}
    if as_json:
        click.echo(json_line({"projects": out}))
        return
    if not out:
        click.echo(f"no workspace memory yet in {root}")
        return
    for project, body in out.items():
        click.echo(printable(f"project {project or '(none)'}: {len(body['skills'])} skills"))
        for r in body["skills"]:
            note = f" (supersedes {r['supersedes']})" if history and r.get("supersedes") else ""
            click.echo(printable(f"  - {r['id']} {r['content'][:110]}{note}"))
        st = body["state"]
        if st:
            click.echo(printable(f"  state ({st['timestamp'][:16]}, session {st.get('session_id', '')}): "
                                 f"{st.get('progress', '')[:100]}"))
            for p in st.get("pending") or []:
                click.echo(printable(f"    pending: {p[:100]}"))
            if st.get("artifacts"):
                click.echo(printable(f"    artifacts: {', '.join(st['artifacts'])[:110]}"))


def inspect_hooks(state, as_json: bool, history: bool) -> None:
    """Every hook: the hand-written files' (``memory/hooks/*.yaml``, skipped files named on stderr) and those
    derived from memory (``memory/hooks/.derived/``; ``history``: those of retired nodes too)."""
    from ..memory import Memory
    from ..scheduling.hooks import HookFiles

    root = state.config.memory_root
    files = HookFiles(root / "hooks")
    files.refresh()
    rows = [{"key": h.key, "id": h.id, "source": h.source, "entry_id": h.entry_id, "entry": h.entry,
             "events": sorted(h.events), "hold": h.hold, "current": True} for h in files.hooks]
    derived = Memory(state.config).derived_hooks
    for rec in derived.listing():
        if not (rec["current"] or history):
            continue
        for data in rec["hooks"]:
            hid = data.get("id", "?") if isinstance(data, dict) else "?"
            rows.append({"key": f"{rec['source']}:{rec['node_id']}:{hid}", "id": hid,
                         "source": f"{rec['source']} {rec['node_id']}", "entry_id": rec["node_id"],
                         "entry": rec["entry"], "events": data.get("events", []) if isinstance(data, dict) else [],
                         "hold": bool(rec.get("hold")), "current": rec["current"]})
    for p in [*files.problems.values(), *derived.problems]:
        click.echo(f"memtier: warning: skipped {printable(p)}", err=True)
    if as_json:
        for r in rows:
            click.echo(json_line(r))
        return
    if not rows:
        click.echo(f"no hooks yet in {root / 'hooks'}")
        return
    for r in rows:
        flags = ("holds" if r["hold"] else "delivers") + ("" if r["current"] else ", retired with its node")
        ref = f" → {r['entry_id']}" if r["entry_id"] else ""
        text = " ".join(r["entry"].split())[:90]
        click.echo(printable(f"{r['key']} [{','.join(r['events'])}; {flags}]{ref}: {text}"))


def _records(path):
    from ..store.episodic import iter_records

    return [rec for rec, _, problem in iter_records(path) if not problem]
