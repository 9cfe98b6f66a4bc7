"""One small client for OpenAI-compatible ``/v1/chat/completions`` endpoints.

Works with the llama.cpp server (``llama_cpp.server``), Ollama, vLLM, SGLang
and hosted APIs. The API key is configured as the *name* of an environment
variable; its value is read at request time, sent only in the
``Authorization: Bearer`` header and scrubbed from every error message.

Model output is data: it is parsed and checked against the caller's schema by
:mod:`memtier_plugin.models.output` (:func:`parse_json`, :func:`validate`, a small
JSON-schema subset). Nothing from a model is executed.

Every model-backed step in memtier has a deterministic fallback: callers catch
:class:`~memtier_plugin.errors.ModelError` and fall back.

Liveness: a hung or dead endpoint must not stall the hooks or every daemon
batch. Each client has a :class:`CircuitBreaker`: after a call fails because
the endpoint did not answer (connect error, timeout), calls fail at once with
:class:`CircuitOpen` for ``circuit_breaker_s``; then one single-attempt probe
is let through (half-open), and its outcome closes or re-opens the breaker.
Callers with a time budget (a hook) pass ``deadline=`` (a ``time.monotonic()``
value): each request's timeout is clamped to what is left, no retry or backoff
runs past it, and a call started after it fails at once.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import httpx

from ..errors import ModelError
from .output import is_finite_number, parse_json, validate

log = logging.getLogger(__name__)

MAX_RETRY_AFTER_S = 30.0
# Logprob charged per continuation token the endpoint did not score (see prompt_logprob).
UNSCORED_TOKEN_LOGPROB = -20.0


@dataclass(frozen=True)
class ModelConfig:
    """Where and how to call a chat model. ``api_key_env`` names an env var; it is never the key."""

    base_url: str
    model: str
    api_key_env: str | None = None
    timeout_s: float = 30
    max_retries: int = 2
    backoff_s: float = 0.5
    temperature: float = 0.0
    max_tokens: int = 512
    json_mode: bool = True
    circuit_breaker_s: float = 60.0  # how long an unreachable endpoint is not called again; 0 = never skip

    @classmethod
    def from_section(cls, section: object) -> "ModelConfig":
        """From the loaded config's ``model`` section (an empty ``api_key_env`` means no key)."""
        values = {f: getattr(section, f) for f in cls.__dataclass_fields__ if hasattr(section, f)}
        values["api_key_env"] = values.get("api_key_env") or None
        return cls(**values)

    @property
    def chat_url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"


@dataclass(frozen=True)
class ChatResult:
    text: str
    data: Any
    prompt_tokens: int
    completion_tokens: int
    logprobs: list[tuple[str, float]] | None
    latency_s: float


def estimate_tokens(text: str) -> int:
    """The chars/4 estimate used when an endpoint reports no usage (at least 1 for non-empty text)."""
    return max(1, len(text) // 4) if text else 0


def _parse_logprobs(choice: dict) -> list[tuple[str, float]] | None:
    """Token logprobs of a choice in OpenAI chat format, or the older completions format."""
    lp = choice.get("logprobs")
    if not isinstance(lp, dict):
        return None
    if isinstance(lp.get("content"), list):
        out = [(str(t.get("token", "")), float(t["logprob"]))
               for t in lp["content"] if isinstance(t, dict) and is_finite_number(t.get("logprob"))]
        return out or None
    tokens, values = lp.get("tokens"), lp.get("token_logprobs")
    if isinstance(tokens, list) and isinstance(values, list):
        out = [(str(t), float(v)) for t, v in zip(tokens, values) if is_finite_number(v)]
        return out or None
    return None


def _top_alternatives(choice: dict) -> list[dict[str, float]]:
    """Per generated position, {token: logprob} of the returned top alternatives (chat format only)."""
    lp = choice.get("logprobs") or {}
    rows = lp.get("content") if isinstance(lp, dict) else None
    out: list[dict[str, float]] = []
    for t in rows if isinstance(rows, list) else []:
        alts = t.get("top_logprobs") if isinstance(t, dict) else None
        out.append({str(a.get("token", "")): float(a["logprob"]) for a in alts or []
                    if isinstance(a, dict) and is_finite_number(a.get("logprob"))})
    return out


# --------------------------------------------------------------------------- circuit breaker


class CircuitOpen(ModelError):
    """The endpoint failed to answer a moment ago; not called again until the cool-down ends."""


class CircuitBreaker:
    """Remembers that an endpoint did not answer, so its callers fail fast instead of waiting again.

    Closed: calls go through. Open (after :meth:`failed`): :meth:`acquire`
    raises :class:`CircuitOpen` until ``cooldown_s`` has passed on ``clock``.
    Half-open: the first caller after the cool-down gets the probe (acquire
    returns True; the client then makes one attempt, no retries) while the
    others still fail fast; the probe's :meth:`succeeded` closes the breaker,
    :meth:`failed` opens it for another cool-down, :meth:`release` (no verdict)
    lets the next caller probe. Thread-safe; ``cooldown_s <= 0`` never opens.
    """

    def __init__(self, cooldown_s: float, *, clock: Callable[[], float] = time.monotonic):
        self.cooldown_s = float(cooldown_s)
        self._clock = clock
        self._lock = threading.Lock()
        self._opened_at: float | None = None
        self._probing = False
        self._reason = ""
        self._last_answer: float | None = None

    @property
    def state(self) -> str:
        with self._lock:
            if self._opened_at is None:
                return "closed"
            return "half-open" if self._clock() >= self._opened_at + self.cooldown_s else "open"

    def acquire(self, name: str = "endpoint") -> bool:
        """May the caller call now? True means "you are the half-open probe"; raises CircuitOpen when not."""
        with self._lock:
            if self._opened_at is None:
                return False
            now = self._clock()
            left = self._opened_at + self.cooldown_s - now
            if left > 0 or self._probing:
                wait = f"next try in {left:.0f}s" if left > 0 else "another call is probing it"
                raise CircuitOpen(_one_line(f"{name}: not called: it did not answer {now - self._opened_at:.0f}s "
                                            f"ago ({self._reason}); {wait}"))
            self._probing = True
            return True

    def succeeded(self) -> None:
        """The endpoint answered (any HTTP status): close."""
        with self._lock:
            self._opened_at, self._probing, self._last_answer = None, False, self._clock()

    def failed(self, reason: str) -> None:
        """The endpoint did not answer: open for a cool-down from now."""
        with self._lock:
            self._probing = False
            if self.cooldown_s > 0:
                self._opened_at, self._reason = self._clock(), _one_line(reason, 120)

    def release(self) -> None:
        """A probe ended without reaching the endpoint (e.g. no time left): the next caller may probe."""
        with self._lock:
            self._probing = False

    def answered_recently(self) -> bool:
        """Whether the endpoint answered within the last cool-down (so a cut-short request proves nothing)."""
        with self._lock:
            return self._last_answer is not None and self._clock() - self._last_answer < self.cooldown_s


# --------------------------------------------------------------------------- client


class ModelClient:
    """Chat client with bounded retries and a circuit breaker. One ``httpx.Client`` is reused; close it or use ``with``.

    The breaker (``breaker``, else one of the client's own with
    ``config.circuit_breaker_s``) is shared by every caller of this client, in
    every thread: one hung endpoint costs one timeout per cool-down, not one
    per call.
    """

    def __init__(self, config: ModelConfig, *, transport: httpx.BaseTransport | None = None,
                 sleep: Callable[[float], None] = time.sleep, breaker: CircuitBreaker | None = None):
        self.config = config
        self._sleep = sleep
        self._http = httpx.Client(transport=transport, timeout=config.timeout_s)
        self.breaker = breaker if breaker is not None else CircuitBreaker(config.circuit_breaker_s)

    def __enter__(self) -> "ModelClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def __repr__(self) -> str:
        return f"ModelClient({self.config.chat_url!r}, model={self.config.model!r})"

    # -- public calls

    def chat(self, messages: list[dict], *, schema: dict | None = None,
             logprobs: bool = False, deadline: float | None = None) -> ChatResult:
        """One chat completion. With ``schema``, the output must be JSON matching it (``.data``).

        ``deadline`` (a ``time.monotonic()`` value) bounds the whole call, retries included.
        """
        cfg = self.config
        body: dict[str, Any] = {"model": cfg.model, "messages": messages,
                                "temperature": cfg.temperature, "max_tokens": cfg.max_tokens}
        if cfg.json_mode and schema is not None:
            body["response_format"] = {"type": "json_object"}
        if logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = 1  # llama-cpp-python returns none when this is 0/absent
        reply, latency = self._post(body, deadline)
        choice, text = self._first_choice(reply)
        usage = reply.get("usage") if isinstance(reply.get("usage"), dict) else {}
        prompt_tokens = usage.get("prompt_tokens")
        completion_tokens = usage.get("completion_tokens")
        if not is_finite_number(prompt_tokens):
            prompt_tokens = sum(estimate_tokens(str(m.get("content") or "")) for m in messages)
        if not is_finite_number(completion_tokens):
            completion_tokens = estimate_tokens(text)
        data = None
        if schema is not None:
            try:
                data = parse_json(text)
            except ValueError as exc:
                raise ModelError(self._scrub(
                    f"{cfg.chat_url}: {exc}: {_one_line(text, 80)}")) from None
            try:
                validate(data, schema)
            except ModelError as exc:
                raise ModelError(self._scrub(f"{cfg.chat_url}: {exc}")) from None
        return ChatResult(text=text, data=data, prompt_tokens=int(prompt_tokens),
                          completion_tokens=int(completion_tokens),
                          logprobs=_parse_logprobs(choice) if logprobs else None,
                          latency_s=latency)

    def prompt_logprob(self, prefix_messages: list[dict], continuation: str,
                       *, top_logprobs: int = 5, deadline: float | None = None) -> float | None:
        """Approximate log p(continuation | prefix_messages), or None if the endpoint gives no logprobs.

        Chat endpoints cannot score a given text (there is no ``echo``), so we
        let the model continue the prefix greedily (temperature 0) with
        ``logprobs`` and ``top_logprobs`` and align its tokens with
        ``continuation``: while the model's token is the next piece of the
        continuation its logprob is added; at the first divergence the
        continuation's token is looked up among the top alternatives (else
        bounded by the lowest alternative); every continuation token after
        that, which the endpoint cannot score, costs ``UNSCORED_TOKEN_LOGPROB``.
        The result is exact when the model would produce the continuation,
        and a monotone, comparable score otherwise - what ablation-style
        attribution (with vs. without a memory in the prefix) needs.
        ``deadline`` bounds the call as in :meth:`chat`.
        """
        cfg = self.config
        body = {"model": cfg.model, "messages": prefix_messages, "temperature": 0.0,
                "max_tokens": estimate_tokens(continuation) + 8,
                "logprobs": True, "top_logprobs": max(1, top_logprobs)}
        reply, _ = self._post(body, deadline)
        choice, _text = self._first_choice(reply)
        tokens = _parse_logprobs(choice)
        if not tokens:
            return None
        alternatives = _top_alternatives(choice)
        rest, total, bound = continuation.lstrip(), 0.0, None
        for i, (tok, lp) in enumerate(tokens):
            if not rest:
                break
            piece = tok.lstrip() if i == 0 else tok
            if piece and rest.startswith(piece):
                total, rest = total + lp, rest[len(piece):]
                continue
            alts = alternatives[i] if i < len(alternatives) else {}
            match = [(a, v) for a, v in alts.items() if a and rest.startswith(a)]
            if match:
                a, v = max(match, key=lambda av: len(av[0]))
                total, rest = total + v, rest[len(a):]
            elif alts:
                bound = min(alts.values())  # the true token ranks below every alternative
            break
        if rest:
            unscored = estimate_tokens(rest)
            first = bound if bound is not None else UNSCORED_TOKEN_LOGPROB
            total += first + UNSCORED_TOKEN_LOGPROB * (unscored - 1)
        return total

    # -- transport

    def _headers(self) -> dict[str, str]:
        env = self.config.api_key_env
        if not env:
            return {}
        key = os.environ.get(env)
        if not key:
            raise ModelError(f"{self.config.chat_url}: api key variable {env} is not set")
        return {"Authorization": f"Bearer {key}"}

    def _scrub(self, text: str) -> str:
        env = self.config.api_key_env
        key = os.environ.get(env) if env else None
        return text.replace(key, "***") if key else text

    def _post(self, body: dict, deadline: float | None = None) -> tuple[dict, float]:
        """POST with retries, under the breaker and within ``deadline``; the reply object and its latency."""
        url = self.config.chat_url
        headers = self._headers()
        probe = self.breaker.acquire(url)
        try:
            reply, latency = self._attempts(body, headers, deadline, probe)
        except _Unanswered as exc:
            if exc.trips:
                self.breaker.failed(str(exc))
            elif probe:
                self.breaker.release()
            raise ModelError(self._scrub(str(exc))) from None
        except _Answered as exc:
            self.breaker.succeeded()
            raise ModelError(self._scrub(str(exc))) from None
        except BaseException:
            if probe:
                self.breaker.release()
            raise
        self.breaker.succeeded()
        return reply, latency

    def _attempts(self, body: dict, headers: dict, deadline: float | None,
                  probe: bool) -> tuple[dict, float]:
        """The retry loop. Raises _Answered (the endpoint replied, uselessly) or _Unanswered (it did not)."""
        cfg, url = self.config, self.config.chat_url
        attempts = 1 if probe else max(0, cfg.max_retries) + 1
        last, last_retry_after, unanswered, trips, made = "", None, False, False, 0
        for attempt in range(attempts):
            if attempt:
                delay = self._delay(attempt, last_retry_after)
                if deadline is not None and time.monotonic() + delay >= deadline:
                    break
                self._sleep(delay)
            timeout = cfg.timeout_s
            if deadline is not None:
                timeout = min(timeout, deadline - time.monotonic())
                if timeout <= 0:
                    break
            last_retry_after = None
            made += 1
            started = time.monotonic()
            try:
                resp = self._http.post(url, json=body, headers=headers, timeout=timeout)
            except httpx.TimeoutException:
                last, unanswered = f"timed out after {timeout:.3g}s", True
                # a request cut short by the deadline says the endpoint is down only if it has not
                # answered lately; otherwise it is merely slower than this caller's budget
                trips = trips or timeout >= cfg.timeout_s or not self.breaker.answered_recently()
            except (httpx.NetworkError, httpx.RemoteProtocolError) as exc:
                last, unanswered, trips = f"{type(exc).__name__}: {exc}", True, True
            except httpx.HTTPError as exc:  # bad URL, unsupported protocol: not retryable
                raise ModelError(self._scrub(_one_line(f"{url}: {type(exc).__name__}: {exc}"))) from None
            else:
                latency = time.monotonic() - started
                if resp.status_code == 200:
                    try:
                        reply = resp.json()
                    except ValueError:
                        raise _Answered(_one_line(f"{url}: response is not JSON: {resp.text[:80]}")) from None
                    if not isinstance(reply, dict):
                        raise _Answered(f"{url}: response is not a JSON object")
                    log.debug("model call %s ok in %.2fs (attempt %d)", url, latency, attempt + 1)
                    return reply, latency
                last, unanswered, trips = f"HTTP {resp.status_code}: {resp.text[:160]}", False, False
                if resp.status_code != 429 and resp.status_code < 500:
                    raise _Answered(_one_line(f"{url}: {last}"))
                last_retry_after = _retry_after(resp)
            log.warning("model call %s failed (attempt %d/%d): %s",
                        url, attempt + 1, attempts, self._scrub(_one_line(last, 160)))
        if not made:
            raise _Unanswered(f"{url}: not called: the caller's deadline has passed", trips=False)
        what = f"failed after {made} attempt{'s' if made > 1 else ''}"
        if made < attempts:
            what += " (the caller's deadline left no time for more)"
        msg = _one_line(f"{url}: {what}: {last}")
        if unanswered:
            raise _Unanswered(msg, trips=trips)
        raise _Answered(msg)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        delay = self.config.backoff_s * 2 ** (attempt - 1)
        return max(delay, retry_after) if retry_after is not None else delay

    def _first_choice(self, reply: dict) -> tuple[dict, str]:
        try:
            choice = reply["choices"][0]
            text = choice["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise ModelError(f"{self.config.chat_url}: response has no choices[0].message.content") from None
        if not isinstance(text, str):
            raise ModelError(f"{self.config.chat_url}: message content is not text")
        return choice, text


class _Answered(Exception):
    """The endpoint replied, but not with a usable answer (the breaker counts it as alive)."""


class _Unanswered(Exception):
    """The endpoint did not reply; ``trips`` says whether that should open the breaker."""

    def __init__(self, message: str, *, trips: bool):
        super().__init__(message)
        self.trips = trips


def _retry_after(resp: httpx.Response) -> float | None:
    try:
        value = float(resp.headers.get("retry-after", ""))
    except ValueError:
        return None
    return min(max(0.0, value), MAX_RETRY_AFTER_S) if math.isfinite(value) else None


def _one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
