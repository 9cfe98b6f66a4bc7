"""Host input made safe: everything a host sends is untrusted, handled here in one place.

Ids are checked before they become paths (:func:`checked_context`), text is
valid UTF-8 without control bytes, every payload is redacted before it is cut
(redaction reads a bounded margin past the cut, so it stays linear and a secret
the cut splits is removed whole) and before anything keeps it.
The facade (:mod:`memtier_plugin.memory`) calls these on every hook's input.
"""

from __future__ import annotations

from typing import Any

from .events import HookContext
from .store.jsonl import clean_obj, clean_text
from .redact import redact, redact_head, redact_tail
from .store.paths import checked_id, clean_id
from .store.tool_entries import MAX_TOOL_TEXT, bounded_value, tool_name, tool_text  # noqa: F401  (the facade's)

#: The part of a prompt a recall reads: its head and its tail (a 10 MB paste cannot make a hook slow).
MAX_QUERY_CHARS = 4000


def query_text(prompt: Any) -> str:
    """What recall searches with (and traces keep): the prompt redacted, its head and tail within
    MAX_QUERY_CHARS.

    Each half is redacted as part of the whole prompt (a bounded margin past the cut), so a secret
    whose "the password is" fell in the dropped middle is still removed whole.
    """
    text = clean_text(prompt if isinstance(prompt, str) else str(prompt))
    if len(text) <= MAX_QUERY_CHARS:
        return redact(text)[0]
    half = MAX_QUERY_CHARS // 2
    return redact_head(text, half)[0] + " … " + redact_tail(text, half)[0]


#: Characters of one earlier message a prompt's query takes (its head).
MAX_TURN_CHARS = 1000


def message_text(msg: Any) -> str:
    """The text of one host message ({role, content}: a string, or a list of parts with ``text``), or ""."""
    if not isinstance(msg, dict) or msg.get("role") not in ("user", "assistant"):
        return ""
    content = msg.get("content")
    if isinstance(content, list):
        content = " ".join(p.get("text", "") for p in content[:20] if isinstance(p, dict)
                           and isinstance(p.get("text"), str))
    return clean_text(content[:MAX_TURN_CHARS * 4]) if isinstance(content, str) else ""


#: How many of the host's latest messages :func:`in_context` reads, and how much of each it compares.
CONTEXT_MESSAGES = 200
_CONTEXT_CHARS = 300


def _context_key(text: str) -> str:
    return " ".join(text.split()).lower()[:_CONTEXT_CHARS]


def in_context(messages: Any, session_id: str):
    """What the agent already holds, as recall's ``skip`` (None when the host sent no conversation): an episode
    of this session whose text is one of the host's messages (the agent reads it in its own context), and a
    skill learned in this session (from what the agent just did). After the host compacts its context those
    messages are gone from ``messages``, and memory may hand them over again."""
    if not isinstance(messages, list) or not messages:
        return None
    seen = {_context_key(t) for t in map(message_text, messages[-CONTEXT_MESSAGES:]) if t.strip()}

    def skip(hit) -> str | None:
        if not session_id or hit.session_id != session_id:
            return None
        if hit.tier == "episodic" and _context_key(hit.content) in seen:
            return "in the agent's context already (this session's conversation)"
        if hit.tier == "procedural" and hit.role == "skill":
            return "learned in this session (the agent's context holds what it did)"
        return None

    return skip


def prompt_query(prompt: Any, messages: Any, *, min_terms: int, turns: int, own: str | None = None) -> str:
    """What recall searches with for a prompt: the prompt (:func:`query_text`), or, when it says fewer than
    ``min_terms`` words of its own and answers a question (the latest assistant message before it asks
    something: "Shall I deploy 2.4 to production now?" / "Yes, go."), that message and the ``turns`` - 1
    user and assistant messages before it, followed by the prompt (each cut to MAX_TURN_CHARS, the whole within
    MAX_QUERY_CHARS, redacted). A short reply to a report ("Done: booked." / "Perfect, thanks.") is searched
    alone. A reply that picks one of the options the latest assistant message offered ("Infante Sagres this
    time", to "Infante Sagres ($284) or the Porto Marriott ($231)") is searched with that message, whatever its
    length: the pick means what the offer says. ``messages`` is the host's conversation (the prompt itself may
    be its last message); ``own``: ``query_text(prompt)``, when the caller has it."""
    from .layers.picks import picks_an_option
    from .recall.packing import content_terms

    query = query_text(prompt) if own is None else own
    if turns <= 0 or min_terms <= 0 or not isinstance(messages, list):
        return query
    short = content_terms(query) < min_terms
    if not short and len(query) > MAX_TURN_CHARS:
        return query
    text = clean_text(prompt if isinstance(prompt, str) else str(prompt))
    recent: list[tuple[str, str]] = []
    for i, msg in enumerate(reversed(messages[-(turns + 8):])):
        said = message_text(msg)
        if i == 0 and said == text and isinstance(msg, dict) and msg.get("role") == "user":
            continue  # the prompt itself
        if said.strip():
            recent.append((msg["role"], said[:MAX_TURN_CHARS]))
        if len(recent) >= (turns if short else 1):  # a prompt that says enough reads the latest message only
            break
    if not recent or recent[0][0] != "assistant":
        return query
    if not short:  # says enough of its own, unless it picks one of the options just offered
        return query_text(f"{recent[0][1]} {text}") if picks_an_option(text, recent[0][1]) else query
    if "?" not in recent[0][1]:
        return query  # it answers no question: it is about itself
    return query_text(" ".join([*(t for _r, t in reversed(recent)), text]))


def checked_context(ctx: HookContext) -> HookContext:
    """The hook context with its agent id checked (InvalidIdError) and every other id cleaned.

    Everything a host sends is untrusted: ``agent_id`` becomes a folder, so it must
    be a plain name; ``session_id``, ``run_id``, ``project`` are bounded, valid
    text, redacted; a missing ``project`` is the empty project, never "all projects".
    """
    return HookContext(agent_id=checked_id(ctx.agent_id), session_key=clean_id(ctx.session_key),
                       session_id=clean_id(ctx.session_id), run_id=clean_id(ctx.run_id),
                       project=clean_id(ctx.project), workspace_dir=ctx.workspace_dir)


def tool_params(value: Any) -> dict:
    """A proposed call's params as pre_tool reads them: a clean mapping ({} for anything else)."""
    return clean_obj(value) if isinstance(value, dict) else {}


def held_call(call_id: str, name: Any, params: Any, result: Any, error: Any) -> dict:
    """A tool call as the run keeps it until agent_end: bounded and redacted, never the raw payload."""
    return {"tool_call_id": call_id, "name": tool_name(name), "params": bounded_value(params),
            "result": None if error else bounded_value(result),
            "error": None if error is None else bounded_value(str(error))}
