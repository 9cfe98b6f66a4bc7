"""Issue 30, item 2: no secret reaches memory/, whether a clip splits it or its shape is a rarer one.

Every test drives the public path (the reference host with memtier's plugin):
prompts, tool calls and results, the end of the run; then every file under the
workspace's ``memory/`` (ledgers, traces, procedural/, state/, the derived
``.index/``) is searched byte for byte for the secret and for every 6-character
piece of it, so a kept prefix counts as a leak.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from memtier_plugin import plugin
from memtier_plugin.events import (AgentEndEvent, HookContext, PromptEvent, SessionEndEvent, ToolCallEvent,
                                   ToolResultEvent)
from memtier_plugin.host import Host
from memtier_plugin.intake import MAX_QUERY_CHARS, query_text
import memtier_plugin.redact as rd
from memtier_plugin.redact import redact
from memtier_plugin.store.episodic import MAX_CONTENT_CHARS
from memtier_plugin.store.tool_entries import MAX_TOOL_TEXT

CUT = MAX_TOOL_TEXT - 30  # where clip_text cuts a tool text (the rest is its " …[cut N chars]" mark)


def memory_bytes(ws: Path) -> bytes:
    files = [p for p in (ws / "memory").rglob("*") if p.is_file()]
    assert files, "nothing was written under memory/"
    return b"\n".join(p.read_bytes() for p in files)


def leaked(data: bytes, secret: str, piece: int = 6) -> list[str]:
    """Pieces of ``secret`` (every ``piece`` characters long) found in ``data``."""
    return [secret[i:i + piece] for i in range(len(secret) - piece + 1) if secret[i:i + piece].encode() in data]


def run_turn(ws: Path, *, prompts=(), calls=(), reply="done", run_id="r1") -> None:
    """One run through the host: prompts, then tool calls (name, params, result, error), then its end."""
    host = Host()
    host.register(plugin, "memtier")
    ctx = HookContext(agent_id="a", session_id="s1", run_id=run_id, project="p", workspace_dir=str(ws))
    for prompt in prompts:
        host.before_prompt_build(PromptEvent(prompt), ctx)
    for i, (name, params, result, error) in enumerate(calls):
        host.pre_tool(ToolCallEvent(name, params, tool_call_id=f"c{i}"), ctx)
        host.post_tool(ToolResultEvent(name, params, tool_call_id=f"c{i}", result=result, error=error), ctx)
    host.agent_end(AgentEndEvent(messages=[{"role": "user", "content": prompts[0] if prompts else "go"},
                                           {"role": "assistant", "content": reply}]), ctx)
    host.session_end(SessionEndEvent("completed"), ctx)


def filler(n: int, seed: str = "x") -> str:
    words = f"deploy atlas {seed} to staging and check the payments worker logs ".split()
    out, size = [], 0
    while size < n:
        w = words[len(out) % len(words)]
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:n]


def straddle(n: int, before: str, secret: str, after: str) -> str:
    """``filler``, ``before``, ``secret``, ``after``, with position ``n`` 10 characters into ``secret``."""
    return filler(n - len(before) - 10) + before + secret + after


# --------------------------------------------------------------------------
# 1. A clip never keeps part of a secret.

URL_PW = "Zq8mW2pLx7vN4kRt"
ENTRY_PW = "Wd3rTq8LmZ2xVb"
PHRASE_PW = "quokka-7Hd2-orbit"
TAIL_PW = "Gx4tYw9Qm2Ln"
JSON_PW = "Vb7nQ2xLk9Pw4Zr"
ERR_PW = "Hd8Kq2Zx7Lm4"
PEM_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7"


def test_a_secret_split_by_a_clip_reaches_no_file(workspace):
    # a tool result cut at 1,970 characters, the URL password straddling the cut, its @host past it
    result = straddle(CUT, " conn postgres://app:", URL_PW, "@db.internal:5432/pay ok") + filler(3000, "r")
    # an error text cut the same way
    error = straddle(CUT, " refused: mysql://root:", ERR_PW, "@10.0.0.7/pay (retry)") + filler(500)
    # JSON longer than the bound: a secret-named field straddling the cut (sorted keys: log, z_password)
    rows = {"log": filler(CUT - 29), "z_password": JSON_PW, "zz": filler(3000)}
    # a prompt past MAX_CONTENT_CHARS: a URL password and a phrase across the entry's cut
    long_prompt = straddle(MAX_CONTENT_CHARS - 30, " cache at redis://:", ENTRY_PW, "@cache.internal:6379 ok")
    long_prompt += " and the vault password is " + PHRASE_PW + " " + filler(5000)
    # a prompt whose "password is" falls in the middle the query drops, the password starting its tail
    half = MAX_QUERY_CHARS // 2
    query_prompt = filler(6000) + " the staging deploy password is " + TAIL_PW + " " + filler(half, "q")
    query_prompt = query_prompt[: query_prompt.index(TAIL_PW) + half]
    # a prompt whose key block starts in the dropped middle, its body in the tail
    pem = "-----BEGIN PRIVATE KEY-----\n" + "\n".join(PEM_BODY + f"{i:02d}" for i in range(60))
    pem_prompt = filler(6000) + " use this key " + pem + "\n-----END PRIVATE KEY-----\n thanks"
    run_turn(workspace, prompts=[long_prompt, query_prompt, pem_prompt],
             calls=[("q", {}, result, None),
                    ("db_login", {"host": "vault"}, None, error),
                    ("fetch_rows", {"table": "t"}, rows, None)])
    data = memory_bytes(workspace)
    for secret in (URL_PW, ERR_PW, JSON_PW, ENTRY_PW, PHRASE_PW, TAIL_PW, PEM_BODY):
        assert leaked(data, secret, 8) == [], secret
    assert b"[REDACTED:password]" in data  # what was there is still said
    written = {p.relative_to(workspace / "memory").parts[0] for p in (workspace / "memory").rglob("*") if p.is_file()}
    assert {"episodic", "traces"} <= written, written


def test_the_query_drops_a_secret_whose_name_fell_in_the_removed_middle():
    # the trace query keeps head and tail: both halves are redacted as part of the whole prompt
    prompt = filler(3000) + f" the staging deploy password is {TAIL_PW} " + filler(MAX_QUERY_CHARS // 2, "q")
    prompt = prompt[: prompt.index(TAIL_PW) + MAX_QUERY_CHARS // 2]
    assert prompt.index(TAIL_PW) == len(prompt) - MAX_QUERY_CHARS // 2
    q = query_text(prompt)
    assert TAIL_PW[:4] not in q and "[REDACTED:password]" in q
    head = f" the staging deploy password is {TAIL_PW} "
    prompt = filler(MAX_QUERY_CHARS // 2 - len(head) + 6) + head + filler(9000)
    q = query_text(prompt)
    assert TAIL_PW[:4] not in q and "[REDACTED:password]" in q


def test_a_key_block_cut_by_either_window_is_removed():
    body = "\n".join("MIIEv" + "QIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7" + str(i % 10) * 11 for i in range(60))
    pem = f"-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----"
    text = filler(5000) + pem + filler(5000)
    half = len(text) // 2  # both cuts fall inside the key block
    head, kinds, _ = rd.redact_head(text, half, margin=100)
    assert "MIIEv" not in head and kinds == ["private_key"]
    tail, kinds, _ = rd.redact_tail(text, len(text) - half, margin=100)
    assert "MIIEv" not in tail and kinds == ["private_key"]


def test_a_run_longer_than_the_margin_is_dropped_not_kept_in_part():
    blob = "glpat-" + "Ab3" * 3000  # one run of token characters, longer than the margin
    text = "see " + blob + " end"
    head, kinds, used = rd.redact_head(text, 100, margin=500)
    assert head == "see " and used == 4
    tail, kinds, used = rd.redact_tail(text, 100, margin=500)
    assert "Ab3" not in tail and tail.endswith(" end")


def test_head_and_tail_match_whole_redaction_away_from_the_cuts():
    text = filler(20_000) + " token=" + "Qw8Er7Ty6Ui5Op4As3Df2" + " " + filler(20_000)
    whole = redact(text)[0]
    assert rd.redact_head(text, 30_000)[0] == whole[:30_000 - (len(text) - len(whole))] or \
        rd.redact_head(text, 30_000)[0].startswith(whole[:20_000])
    assert rd.redact_tail(text, 10_000)[0] == whole[-10_000:]


# --------------------------------------------------------------------------
# Cost: redaction of a huge paste stays bounded (measured here, asserted loosely).


@pytest.mark.parametrize("size", [1_000_000, 10_000_000])
def test_a_huge_prompt_or_tool_result_stays_cheap(size):
    from memtier_plugin.store.tool_entries import bounded_value

    text = filler(size) + " password: hunter2secret"
    start = time.process_time()
    bounded_value(text)
    query_text(text)
    elapsed = time.process_time() - start
    # clean_text over the whole input is linear and in C; redaction sees at most a bound
    assert elapsed < 1.0, f"{elapsed:.2f} s for {size} characters (margin {rd.CLIP_MARGIN})"


# --------------------------------------------------------------------------
# 2. The rarer shapes (issue 30's list and newer vendor formats) reach no file either.


def test_the_issue30_shapes_reach_no_file_through_the_host(workspace):
    from test_redact import ISSUE30, VENDOR

    newer = VENDOR[VENDOR.index(next(v for v in VENDOR if v[1].startswith("sk-or-v1-"))):]
    cases = [(t, s) for t, s, _ in ISSUE30] + [("use <S> for the release", s) for _, s in newer]
    texts = [t.replace("<S>", s) for t, s in cases]
    prompts = [f"note {i}: {text}" for i, text in enumerate(texts)]
    calls = [("shell", {"cmd": text}, f"output of step {i}:\n{text}\nexit 0", None) for i, text in enumerate(texts)]
    calls.append(("deploy", {"config": "\n".join(texts)}, None, "failed: " + " | ".join(texts[:8])))
    run_turn(workspace, prompts=prompts, calls=calls, reply="done; creds were " + texts[0])
    data = memory_bytes(workspace)
    found = [s for _, s in cases if s.encode() in data or (len(s) >= 12 and leaked(data, s, 10))]
    assert found == []
