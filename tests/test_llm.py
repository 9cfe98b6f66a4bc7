"""ModelClient against a real HTTP server on loopback (no mocks of httpx)."""

from __future__ import annotations

import dataclasses
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from memtier_plugin.errors import ModelError
from memtier_plugin.consolidation.facts import facts_schema
from memtier_plugin.models.chat import (
    ChatResult, CircuitBreaker, CircuitOpen, ModelClient, ModelConfig, UNSCORED_TOKEN_LOGPROB,
)
from memtier_plugin.models.output import parse_json, schema_errors, validate

SECRET = "sk-test-9f8e7d6c5b4a-do-not-leak"
KEY_ENV = "MEMTIER_TEST_LLM_KEY"
FACTS_SCHEMA = {
    "type": "object",
    "required": ["facts"],
    "additionalProperties": False,
    "properties": {
        "facts": {
            "type": "array",
            "maxItems": 5,
            "items": {
                "type": "object",
                "required": ["attribute", "value"],
                "additionalProperties": False,
                "properties": {
                    "attribute": {"type": "string", "maxLength": 40},
                    "value": {"type": "string"},
                    "confidence": {"type": "number"},
                },
            },
        }
    },
}
GOOD = {"facts": [{"attribute": "seat", "value": "aisle"}]}


def completion(content, usage=True, logprobs=None):
    body = {"id": "c1", "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": "stop"}]}
    if usage:
        body["usage"] = {"prompt_tokens": 17, "completion_tokens": 9, "total_tokens": 26}
    if logprobs is not None:
        body["choices"][0]["logprobs"] = {"content": logprobs}
    return body


class Scripted(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.script: list[tuple] = []  # (status, body, delay_s); the last entry repeats
        self.requests: list[dict] = []
        self.lock = threading.Lock()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        srv = self.server
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with srv.lock:
            srv.requests.append({"path": self.path, "headers": dict(self.headers),
                                 "body": json.loads(raw)})
            status, body, delay = srv.script.pop(0) if len(srv.script) > 1 else srv.script[0]
        time.sleep(delay)
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    srv = Scripted()
    thread = threading.Thread(target=srv.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def make_client(server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    sleeps: list[float] = []
    clients = []

    def make(breaker=None, **overrides):
        cfg = ModelConfig(**{"base_url": server.url, "model": "qwen", "api_key_env": KEY_ENV,
                             "timeout_s": 2.0, **overrides})
        client = ModelClient(cfg, sleep=sleeps.append, breaker=breaker)
        client.sleeps = sleeps
        clients.append(client)
        return client

    yield make
    for c in clients:
        c.close()


MSGS = [{"role": "user", "content": "Extract facts: I prefer aisle seats."}]


def test_valid_json_with_usage(server, make_client):
    server.script = [(200, completion(json.dumps(GOOD)), 0)]
    res = make_client().chat(MSGS, schema=FACTS_SCHEMA)
    assert isinstance(res, ChatResult)
    assert res.data == GOOD
    assert (res.prompt_tokens, res.completion_tokens) == (17, 9)
    assert res.logprobs is None and res.latency_s >= 0
    req = server.requests[0]
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["Authorization"] == f"Bearer {SECRET}"
    assert req["body"]["response_format"] == {"type": "json_object"}
    assert req["body"]["model"] == "qwen" and req["body"]["temperature"] == 0.0
    assert req["body"]["messages"] == MSGS
    assert SECRET not in repr(res)


def test_fenced_json_and_usage_estimate(server, make_client):
    text = "Here you go:\n```json\n" + json.dumps(GOOD) + "\n```\n"
    server.script = [(200, completion(text, usage=False), 0)]
    res = make_client().chat(MSGS, schema=FACTS_SCHEMA)
    assert res.data == GOOD
    assert res.completion_tokens == len(text) // 4
    assert res.prompt_tokens == len(MSGS[0]["content"]) // 4


def test_without_schema_text_only_and_no_json_mode(server, make_client):
    server.script = [(200, completion("plain words"), 0)]
    res = make_client().chat(MSGS)
    assert res.text == "plain words" and res.data is None
    assert "response_format" not in server.requests[0]["body"]


def test_no_key_env_sends_no_authorization(server, make_client):
    server.script = [(200, completion("ok"), 0)]
    make_client(api_key_env=None).chat(MSGS)
    assert "Authorization" not in server.requests[0]["headers"]


def test_unset_key_env_is_a_model_error(server, make_client, monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(ModelError, match=KEY_ENV):
        make_client().chat(MSGS)
    assert server.requests == []


@pytest.mark.parametrize("content, match", [
    ("I am not JSON at all", "not valid JSON"),
    ('{"facts": [{"attribute": "seat"}]}', "missing required property 'value'"),
    ('{"facts": [], "extra": 1}', "unexpected property"),
    ('{"facts": "aisle"}', "expected array"),
])
def test_bad_output_raises_without_retry(server, make_client, content, match):
    server.script = [(200, completion(content), 0)]
    with pytest.raises(ModelError, match=match) as err:
        make_client().chat(MSGS, schema=FACTS_SCHEMA)
    assert len(server.requests) == 1
    assert "\n" not in str(err.value) and server.url in str(err.value)


def test_non_json_http_body(server, make_client):
    server.script = [(200, b"<html>proxy</html>", 0)]
    with pytest.raises(ModelError, match="response is not JSON"):
        make_client().chat(MSGS)


def test_500_twice_then_200_retries(server, make_client):
    server.script = [(500, {"error": "busy"}, 0), (500, {"error": "busy"}, 0),
                     (200, completion(json.dumps(GOOD)), 0)]
    client = make_client(max_retries=2, backoff_s=0.5)
    res = client.chat(MSGS, schema=FACTS_SCHEMA)
    assert res.data == GOOD
    assert len(server.requests) == 3
    assert client.sleeps == [0.5, 1.0]  # exponential backoff


def test_500_always_exhausts_retries(server, make_client):
    server.script = [(503, {"error": "down"}, 0)]
    with pytest.raises(ModelError, match=r"failed after 3 attempts: HTTP 503") as err:
        make_client(max_retries=2).chat(MSGS)
    assert len(server.requests) == 3
    assert SECRET not in str(err.value)


def test_429_is_retried(server, make_client):
    server.script = [(429, {"error": "slow down"}, 0), (200, completion("ok"), 0)]
    assert make_client().chat(MSGS).text == "ok"
    assert len(server.requests) == 2


def test_401_not_retried_and_key_never_leaks(server, make_client):
    # a server that echoes the key back must not get it into our message
    server.script = [(401, {"error": f"Incorrect API key provided: {SECRET}"}, 0)]
    with pytest.raises(ModelError, match="HTTP 401") as err:
        make_client(max_retries=3).chat(MSGS)
    assert len(server.requests) == 1
    assert server.requests[0]["headers"]["Authorization"] == f"Bearer {SECRET}"
    assert SECRET not in str(err.value) and "***" in str(err.value)
    assert "\n" not in str(err.value)


def test_slow_response_times_out(server, make_client):
    server.script = [(200, completion("late"), 1.0)]
    client = make_client(timeout_s=0.2, max_retries=1)
    with pytest.raises(ModelError, match=r"failed after 2 attempts: timed out after 0.2s"):
        client.chat(MSGS)
    assert len(server.requests) == 2 and client.sleeps == [0.5]  # one backoff between the attempts


def test_connection_refused(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    url = f"http://127.0.0.1:{port}/v1"
    sleeps = []
    with ModelClient(ModelConfig(url, "m", KEY_ENV, max_retries=2), sleep=sleeps.append) as c:
        with pytest.raises(ModelError, match=r"failed after 3 attempts: ConnectError") as err:
            c.chat(MSGS)
    msg = str(err.value)
    assert msg.startswith(url + "/chat/completions") and SECRET not in msg
    assert len(sleeps) == 2
    assert c.breaker.state == "open"  # nobody listening: the next call fails at once
    with pytest.raises(CircuitOpen, match="not called: it did not answer .*ConnectError"):
        c.chat(MSGS)
    assert len(sleeps) == 2


# --------------------------------------------------------------------------- liveness


class Clock:
    """The breaker's clock, moved by the test."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now

    def advance(self, seconds):
        self.now += seconds


HUNG = (200, completion("too late"), 3.0)  # answers long after every timeout below


def _tripped(server, make_client, *, retries):
    """A client whose breaker (on a test clock) has just opened on a hung endpoint."""
    clock = Clock()
    client = make_client(timeout_s=0.2, max_retries=retries, breaker=CircuitBreaker(60, clock=clock))
    server.script = [HUNG]
    with pytest.raises(ModelError, match="timed out after 0.2s"):
        client.chat(MSGS)
    assert len(server.requests) == retries + 1 and client.breaker.state == "open"
    return client, clock


def test_breaker_opens_fails_fast_half_opens_and_closes(server, make_client):
    client, clock = _tripped(server, make_client, retries=1)
    # open: fails at once, the endpoint sees no request, and the error says why and until when
    with pytest.raises(CircuitOpen, match=r"not called: it did not answer 0s ago \(.*timed out.*\); next try in 60s"):
        client.prompt_logprob(MSGS, "x")
    clock.advance(59)
    with pytest.raises(CircuitOpen, match="next try in 1s"):
        client.chat(MSGS)
    assert len(server.requests) == 2
    # the cool-down is over: one probe goes through, its answer closes the breaker
    clock.advance(2)
    assert client.breaker.state == "half-open"
    server.script = [(200, completion("ok"), 0)]
    assert client.chat(MSGS).text == "ok"
    assert len(server.requests) == 3 and client.breaker.state == "closed"
    assert client.chat(MSGS).text == "ok" and len(server.requests) == 4


def test_failed_probe_is_one_attempt_and_opens_a_new_cool_down(server, make_client):
    client, clock = _tripped(server, make_client, retries=2)
    assert len(client.sleeps) == 2
    clock.advance(61)
    with pytest.raises(ModelError, match="failed after 1 attempt: timed out"):
        client.chat(MSGS)  # the probe: no retries, no backoff
    assert len(server.requests) == 4 and len(client.sleeps) == 2
    clock.advance(59)  # 59 s after the probe failed, 120 s after the first failure
    with pytest.raises(CircuitOpen):
        client.chat(MSGS)
    assert len(server.requests) == 4


def test_while_the_probe_runs_other_callers_fail_fast(server, make_client):
    client, clock = _tripped(server, make_client, retries=0)
    clock.advance(61)
    server.script = [(200, completion("slow but fine"), 0.5)]
    client.config = dataclasses.replace(client.config, timeout_s=5.0)  # room for the slow answer
    results = []
    probe = threading.Thread(target=lambda: results.append(client.chat(MSGS).text))
    probe.start()
    while len(server.requests) < 2:  # the probe has reached the server
        time.sleep(0.01)
    with pytest.raises(CircuitOpen, match="another call is probing it"):
        client.chat(MSGS)
    probe.join()
    assert results == ["slow but fine"] and len(server.requests) == 2
    assert client.breaker.state == "closed"


def test_an_endpoint_that_answers_keeps_the_breaker_closed(server, make_client):
    client = make_client(max_retries=1, breaker=CircuitBreaker(60, clock=Clock()))
    server.script = [(503, {"error": "busy"}, 0)]
    with pytest.raises(ModelError, match="HTTP 503"):
        client.chat(MSGS)
    server.script = [(401, {"error": "no"}, 0)]
    with pytest.raises(ModelError, match="HTTP 401"):
        client.chat(MSGS)
    server.script = [(200, completion("not json"), 0)]
    with pytest.raises(ModelError, match="not valid JSON"):
        client.chat(MSGS, schema=FACTS_SCHEMA)
    assert client.breaker.state == "closed" and len(server.requests) == 4


def test_zero_cool_down_never_skips_the_endpoint(server, make_client):
    client = make_client(timeout_s=0.2, max_retries=0, circuit_breaker_s=0)
    server.script = [HUNG]
    for _ in range(2):
        with pytest.raises(ModelError, match="timed out"):
            client.chat(MSGS)
    assert len(server.requests) == 2 and client.breaker.state == "closed"


def test_deadline_bounds_the_call_with_its_retries(server, make_client):
    # per request 5 s, 3 attempts: ~16 s without a deadline
    client = make_client(timeout_s=5.0, max_retries=2, breaker=CircuitBreaker(60, clock=Clock()))
    server.script = [HUNG]
    started = time.monotonic()
    with pytest.raises(ModelError, match=r"failed after 1 attempt \(the caller's deadline left no time for more\)"):
        client.chat(MSGS, deadline=started + 0.3)
    assert time.monotonic() - started < 2.5  # liveness bound: the deadline, not 3 x 5 s
    assert len(server.requests) == 1 and client.sleeps == []
    assert client.breaker.state == "open"  # it never answered: cut short or not, it is down


def test_a_deadline_already_passed_sends_nothing(server, make_client):
    client = make_client(breaker=CircuitBreaker(60, clock=Clock()))
    server.script = [(200, completion("ok"), 0)]
    with pytest.raises(ModelError, match="not called: the caller's deadline has passed"):
        client.chat(MSGS, deadline=time.monotonic() - 1)
    assert server.requests == [] and client.breaker.state == "closed"


def test_cut_short_request_to_an_endpoint_that_just_answered_is_not_an_outage(server, make_client):
    clock = Clock()
    client = make_client(timeout_s=5.0, max_retries=2, breaker=CircuitBreaker(60, clock=clock))
    server.script = [(200, completion("ok"), 0), HUNG]
    assert client.chat(MSGS).text == "ok"
    with pytest.raises(ModelError, match="timed out"):
        client.chat(MSGS, deadline=time.monotonic() + 0.3)
    assert client.breaker.state == "closed"  # merely slower than this caller's budget
    clock.advance(61)  # no answer for a whole cool-down: now a cut-short request does mean down
    with pytest.raises(ModelError, match="timed out"):
        client.chat(MSGS, deadline=time.monotonic() + 0.3)
    assert client.breaker.state == "open"


def test_config_carries_the_cool_down(tmp_path):
    from memtier_plugin.config import load_config

    section = load_config(flags={"paths.workspace": str(tmp_path), "model.circuit_breaker_s": 7}).model
    client = ModelClient(ModelConfig.from_section(section))
    assert client.breaker.cooldown_s == 7.0 and client.breaker.state == "closed"
    client.close()


LOGPROBS = [
    {"token": "The", "logprob": -0.1, "top_logprobs": [{"token": "The", "logprob": -0.1}]},
    {"token": " aisle", "logprob": -0.5, "top_logprobs": [{"token": " aisle", "logprob": -0.5}]},
    {"token": ".", "logprob": -0.2, "top_logprobs": [{"token": ".", "logprob": -0.2}]},
]


def test_logprobs_present(server, make_client):
    server.script = [(200, completion("The aisle.", logprobs=LOGPROBS), 0)]
    res = make_client().chat(MSGS, logprobs=True)
    assert res.logprobs == [("The", -0.1), (" aisle", -0.5), (".", -0.2)]
    body = server.requests[0]["body"]
    assert body["logprobs"] is True and body["top_logprobs"] >= 1


def test_logprobs_absent(server, make_client):
    server.script = [(200, completion("The aisle."), 0)]
    client = make_client()
    assert client.chat(MSGS, logprobs=True).logprobs is None
    assert client.prompt_logprob(MSGS, "The aisle.") is None


def test_prompt_logprob_exact_when_model_agrees(server, make_client):
    server.script = [(200, completion("The aisle.", logprobs=LOGPROBS), 0)]
    lp = make_client().prompt_logprob(MSGS, "The aisle.")
    assert lp == pytest.approx(-0.8)
    body = server.requests[0]["body"]
    assert body["logprobs"] is True and "response_format" not in body


def test_prompt_logprob_divergence_uses_alternative_then_floor(server, make_client):
    rows = [dict(LOGPROBS[0]),
            {"token": " window", "logprob": -0.3,
             "top_logprobs": [{"token": " window", "logprob": -0.3},
                              {"token": " aisle", "logprob": -1.5}]},
            {"token": ".", "logprob": -0.2, "top_logprobs": []}]
    server.script = [(200, completion("The window.", logprobs=rows), 0)]
    client = make_client()
    # " aisle" found among alternatives; the "." after it cannot be scored
    assert client.prompt_logprob(MSGS, "The aisle.") == pytest.approx(
        -0.1 - 1.5 + UNSCORED_TOKEN_LOGPROB)
    # more likely continuation scores higher than a less likely one
    server.script = [(200, completion("The window.", logprobs=rows), 0)]
    assert client.prompt_logprob(MSGS, "The window.") > client.prompt_logprob(MSGS, "The aisle.")


def test_completions_style_logprobs_are_read(server, make_client):
    body = completion("hi")
    body["choices"][0]["logprobs"] = {"tokens": ["h", "i"], "token_logprobs": [-1.0, -2.0]}
    server.script = [(200, body, 0)]
    assert make_client().chat(MSGS, logprobs=True).logprobs == [("h", -1.0), ("i", -2.0)]


def test_client_reuses_one_connection_and_closes(server, make_client):
    server.script = [(200, completion("ok"), 0)]
    client = make_client()
    client.chat(MSGS)
    client.chat(MSGS)
    assert len(server.requests) == 2
    client.close()
    with pytest.raises(RuntimeError):
        client.chat(MSGS)


# --------------------------------------------------------------------------- pure parts


@pytest.mark.parametrize("text, expected", [
    ('{"a": 1}', {"a": 1}),
    ('  [1, 2]\n', [1, 2]),
    ('```json\n{"a": 1}\n```', {"a": 1}),
    ('Sure!\n```\n{"a": 2}\n```\nDone.', {"a": 2}),
])
def test_parse_json(text, expected):
    assert parse_json(text) == expected


@pytest.mark.parametrize("text", ["", "nope", '{"a": NaN}', "```json\n{bad}\n```", "[" * 5000])
def test_parse_json_rejects(text):
    with pytest.raises(ValueError):
        parse_json(text)


@pytest.mark.parametrize("instance, schema, ok", [
    (1, {"type": "integer"}, True),
    (1.0, {"type": "integer"}, True),
    (1.5, {"type": "integer"}, False),
    (True, {"type": "integer"}, False),
    (True, {"type": "number"}, False),
    (None, {"type": "null"}, True),
    (None, {"type": ["string", "null"]}, True),
    (False, {"type": "boolean"}, True),
    ("abc", {"type": "string", "maxLength": 2}, False),
    ("ab", {"type": "string", "maxLength": 2}, True),
    ([1, 2, 3], {"type": "array", "maxItems": 2}, False),
    ([1, "x"], {"type": "array", "items": {"type": "integer"}}, False),
    ("b", {"enum": ["a", "b"]}, True),
    ("c", {"enum": ["a", "b"]}, False),
    (True, {"enum": [1]}, False),
    ({"a": 1}, {"type": "object", "properties": {"a": {"type": "string"}}}, False),
    ({"a": 1, "b": 2}, {"type": "object", "properties": {"a": {}}}, True),
    ({"a": 1, "b": 2}, {"type": "object", "properties": {"a": {}},
                        "additionalProperties": False}, False),
    ({}, {"type": "object", "required": ["a"]}, False),
    (0, {"type": "number", "minimum": 0, "maximum": 1}, True),
    (1, {"type": "number", "minimum": 0, "maximum": 1}, True),
    (0.5, {"type": "number", "minimum": 0, "maximum": 1}, True),
    (-0.01, {"type": "number", "minimum": 0}, False),
    (1.01, {"type": "number", "maximum": 1}, False),
    (float("nan"), {"type": "number", "minimum": 0, "maximum": 1}, False),
    (float("inf"), {"type": "number", "minimum": 0}, False),
    ("5", {"minimum": 9}, True),  # minimum/maximum only constrain numbers
    (True, {"maximum": 0}, True),  # booleans are not numbers
    ("2026-10-05", {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}"}, True),
    ("2026-10-05T09:00:00Z", {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}"}, True),
    ("next week", {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}"}, False),
    ("on 2026-10-05", {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}"}, False),
    ("abc", {"type": "string", "pattern": "b"}, True),  # unanchored: a search, not a full match
    ("abc", {"type": "string", "pattern": "^b"}, False),
    (None, {"type": ["string", "null"], "pattern": "^x$"}, True),  # pattern only constrains strings
])
def test_schema_subset(instance, schema, ok):
    assert (schema_errors(instance, schema) == []) is ok


def test_schema_errors_name_paths_and_unknown_keywords_raise():
    errs = schema_errors({"facts": [{"attribute": 3, "value": "x"}]}, FACTS_SCHEMA)
    assert errs == ["$.facts[0].attribute: expected string, got integer"]
    with pytest.raises(ModelError, match="does not match"):
        validate({"facts": 1}, FACTS_SCHEMA)
    with pytest.raises(ValueError, match="format"):
        schema_errors("x", {"type": "string", "format": "date"})
    with pytest.raises(ValueError, match="exclusiveMinimum"):
        schema_errors(1, {"type": "number", "exclusiveMinimum": 0})


@pytest.mark.parametrize("schema, match", [
    ({"type": "string", "pattern": "(unclosed"}, "invalid schema pattern"),
    ({"type": "string", "pattern": 3}, "pattern .* must be a string"),
    ({"type": "number", "minimum": "0"}, "minimum .* must be a finite number"),
    ({"type": "number", "maximum": float("nan")}, "maximum .* must be a finite number"),
])
def test_bad_schema_values_raise_whatever_the_instance(schema, match):
    for instance in ("x", 0.5, None):
        with pytest.raises(ValueError, match=match):
            schema_errors(instance, schema)


def test_pattern_comes_from_the_schema_not_the_instance():
    # a regex-looking model string is matched as text, never compiled
    assert schema_errors("(a+)+$", {"type": "string", "pattern": r"^\(a\+\)\+\$$"}) == []
    assert schema_errors("(unclosed", {"type": "string", "pattern": "x"}) != []


def _model_fact(**overrides):
    fact = {"fact_kind": "constraint", "subject": "user", "attribute": "hotel_budget",
            "value": "up to $300 a night", "content": "User's hotel budget is up to $300 a night",
            "confidence": 0.9, "effective_time": "2026-10-18"}
    return {**fact, **overrides}


@pytest.mark.parametrize("fact", [_model_fact(), _model_fact(effective_time=None),
                                  _model_fact(confidence=0, effective_time="2026-10-18T11:15:09Z"),
                                  _model_fact(confidence=1)])
def test_chat_accepts_valid_answers_under_the_full_facts_schema(server, make_client, fact):
    answer = {"facts": [fact]}
    server.script = [(200, completion(json.dumps(answer)), 0)]
    res = make_client().chat(MSGS, schema=facts_schema())
    assert res.data == answer


@pytest.mark.parametrize("fact, problem", [
    (_model_fact(confidence=1.5), "greater than the maximum"),
    (_model_fact(confidence=-0.1), "less than the minimum"),
    (_model_fact(effective_time="next week"), "does not match pattern"),
])
def test_chat_rejects_answers_the_full_facts_schema_forbids(server, make_client, fact, problem):
    server.script = [(200, completion(json.dumps({"facts": [fact]})), 0)]
    with pytest.raises(ModelError, match=problem):
        make_client().chat(MSGS, schema=facts_schema())
    assert len(server.requests) == 1  # a schema violation is not retried


def test_daemon_batches_after_an_unanswered_one_do_not_wait_again(server, tmp_path):
    """Extraction shares the client's breaker across batches: one timeout, then heuristics at once."""
    from memtier_plugin.config import load_config
    from memtier_plugin.consolidation.batch import Consolidator
    from memtier_plugin.store.episodic import Ledger

    cfg = load_config(flags={"paths.workspace": str(tmp_path), "model.enabled": True, "model.base_url": server.url,
                             "model.timeout_s": 0.2, "model.max_retries": 1, "consolidation.extractor": "model"})
    server.script = [HUNG]
    ledger = Ledger(cfg.memory_root)
    cons = Consolidator(cfg)
    try:
        reports = []
        for batch in range(3):
            ledger.add(agent_id="a", session_id="s", project="p",
                       content=f"I prefer aisle seats on flight number {batch} to Lisbon.")
            reports.append(cons.run_batch())
    finally:
        cons.close()
    assert len(server.requests) == 2  # the first batch's two attempts; none after
    assert [r.fallbacks for r in reports] == [1, 1, 1]
    assert "timed out" in reports[0].errors[0] and "not called" in reports[1].errors[0]
