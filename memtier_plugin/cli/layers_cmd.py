"""``memtier inspect topics`` and ``memtier inspect workspace``: the standing layers, as a person reads them."""

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
                                 f" · projects {scope if scope == '*' else ','.join(scope)}: {n.rec['content'][:90]}{mark}"))


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


def _records(path):
    from ..store.episodic import iter_records

    return [rec for rec, _, problem in iter_records(path) if not problem]
