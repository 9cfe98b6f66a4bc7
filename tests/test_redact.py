"""Secret redaction: every kind caught, exact spans, no false positives."""

from __future__ import annotations

import random
import string

import pytest

from memtier_plugin.redact import KINDS, MARKER_RE, is_secret_key, marker, redact, redact_obj


def _fake(prefix: str, n: int, alphabet: str = string.ascii_letters + string.digits, seed: int = 7) -> str:
    """A format-valid but fake secret: ``prefix`` + ``n`` characters."""
    rng = random.Random(f"{prefix}{n}{seed}")
    body = "".join(rng.choice(alphabet) for _ in range(n))
    if not any(c.isdigit() for c in body):
        body = "7" + body[1:]
    return prefix + body


OPENAI = _fake("sk-", 48)
OPENAI_PROJ = _fake("sk-proj-", 64, string.ascii_letters + string.digits + "_-")
ANTHROPIC = _fake("sk-ant-api03-", 80, string.ascii_letters + string.digits + "_-")
AWS_ID = _fake("AKIA", 16, string.ascii_uppercase + string.digits)
AWS_STS_ID = _fake("ASIA", 16, string.ascii_uppercase + string.digits)
AWS_SECRET = _fake("", 40, string.ascii_letters + string.digits + "/+")
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
    "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "QyNTUxOQAAACBmZXN0aXZlLWZha2Uta2V5LWZvci10ZXN0cy1vbmx5AAAAAAAAAAAAAAAA\n"
    "-----END OPENSSH PRIVATE KEY-----"
)

# (template, secret, kind): "<S>" in the template is where the secret sits. The
# redacted text must be exactly the template with <S> replaced by the marker.
POSITIVE = [
    ("my key is <S> thanks", OPENAI, "openai_key"),
    ("OPENAI_API_KEY=<S>", OPENAI_PROJ, "openai_key"),
    ("use <S> for claude", ANTHROPIC, "anthropic_key"),
    ("aws id <S> in us-east-1", AWS_ID, "aws_access_key"),
    ("temporary creds <S>.", AWS_STS_ID, "aws_access_key"),
    ("aws_secret_access_key = <S>", AWS_SECRET, "aws_secret_key"),
    ("export AWS_SECRET_ACCESS_KEY=<S>", AWS_SECRET, "aws_secret_key"),
    ("token ghp: <S>", _fake("ghp_", 36), "github_token"),
    ("gho <S>", _fake("gho_", 36), "github_token"),
    ("ghu <S>", _fake("ghu_", 36), "github_token"),
    ("ghs <S>", _fake("ghs_", 36), "github_token"),
    ("ghr <S>", _fake("ghr_", 36), "github_token"),
    ("fine-grained <S>", _fake("github_pat_11A", 79, string.ascii_letters + string.digits + "_"), "github_token"),
    ("slack bot <S>", "xoxb-1234567890-1234567890123-" + _fake("", 24), "slack_token"),
    ("slack user <S>", "xoxp-2222222222-3333333333-" + _fake("", 32), "slack_token"),
    ("stripe <S>", _fake("sk_live_", 24), "stripe_key"),
    ("restricted <S>", _fake("rk_live_", 24), "stripe_key"),
    ("maps key <S>", _fake("AIza", 35, string.ascii_letters + string.digits + "_-"), "google_api_key"),
    ("hub login <S>", _fake("hf_", 34), "huggingface_token"),
    ("session <S> expired", JWT, "jwt"),
    ("curl -H 'Authorization: Bearer <S>' https://api", JWT, "jwt"),
    ("curl -H 'Authorization: Bearer <S>'", "abc123def456ghi789", "bearer_token"),
    ("call it with Bearer <S>.", "a1b2c3d4e5f6g7h8", "bearer_token"),
    ("Authorization: Basic <S>", "dXNlcjpwYXNzd29yZA==", "authorization"),
    ('{"Authorization": "token <S>"}', _fake("ghp_", 36, seed=3), "github_token"),
    ("postgres://atlas:<S>@db.internal:5432/atlas", "Tr0ub4dor&3", "url_password"),
    ("redis://:<S>@cache.internal:6379/0", "s3cr3t-cache-pw", "url_password"),
    ("https://bob:<S>@example.com/x", "p@ss:word", "url_password"),
    ("password=<S>", "hunter2", "password"),
    ("OPENAI_API_KEY=<S>. Then deploy.", OPENAI, "openai_key"),
    ("the password is password=<S>. Done", "hunter2", "password"),
    ("db_password: <S>", "Winter2026!", "password"),
    ('DB_PASSWORD="<S>"', "correct horse battery staple", "password"),
    ("passwd = '<S>'", "letmein99", "password"),
    ('"api_key": "<S>"', "abc def 123", "api_key"),
    ('{"apiKey":"<S>"}', "k-12345-xyz", "api_key"),
    ("X-Api-Key: <S>", "d41d8cd98f00b204", "api_key"),
    ("token: <S>", "xyz123", "token"),
    ("refresh_token=<S>&grant_type=refresh", "1//0gABCdef", "token"),
    ("client_secret: <S>", "0a1b2c3d4e5f", "secret"),
    ('{\\"password\\": \\"<S>\\"}', "hunter22", "password"),
    ("key material:\n<S>\nend", PEM, "private_key"),
    ("<S>", PEM.replace("OPENSSH ", ""), "private_key"),
    ("pasted <S>", "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7 cut off here", "private_key"),
    ("SIGNING_SALT = '<S>'", "q8Fj2LmZ0xR7tYpW3kVbN6cHs9Dg", "high_entropy"),
    ('"webhook_sig": "<S>"', "Zk3Lq9Xw2Pv7Rt5Yn8Bm4Hc6Jd1Gf0Sa", "high_entropy"),
]


@pytest.mark.parametrize("template, secret, kind", POSITIVE, ids=[f"{k}-{i}" for i, (_, _, k) in enumerate(POSITIVE)])
def test_each_kind_is_redacted_exactly(template, secret, kind):
    text = template.replace("<S>", secret)
    out, kinds = redact(text)
    assert kinds == [kind]
    assert out == template.replace("<S>", marker(kind))
    assert secret not in out


def test_every_kind_is_covered_by_the_table():
    assert {k for *_, k in POSITIVE} == set(KINDS)


NEGATIVE = [
    "Book me an aisle seat to Lisbon, vegetarian meal, hotel under $300 a night.",
    "Never book flights before 8am. Budget changed from $200 to $300 a night.",
    "Entry ep-20261129-3f2a9c1b was written at 2026-11-29T14:00:00.123Z.",
    "uuid 123e4567-e89b-12d3-a456-426614174000 and UUID 123E4567-E89B-12D3-A456-426614174000",
    "Fixed in commit 4f1c2a9b8e7d6c5b4a3928170f6e5d4c3b2a1908 yesterday.",
    "commit: 4f1c2a9b8e7d6c5b4a3928170f6e5d4c3b2a1908",
    "The bearer of bad news arrived; bearer bonds are old.",
    "The token budget is 4000 tokens; max_tokens: 512, tokens=40",
    "session_key: agent:assistant:main, session_id: s-2026-10-05-a",
    "risk-assessment-for-the-atlas-deploy-2026 and task-force-2026-plan-for-q4-review",
    "See https://docs.example.com/guide?page=2#intro and mail ops@example.com",
    "https://github.com/acme/atlas/pull/42 merged; deploy atlas v1.4.2 at 09:30",
    "ASIA and ASIAN cuisine; AKIA is not a word",
    "Path: /srv/atlas/releases/20261005T0930Z/current/static/js/app",
    "secrets: [db, api] and password_hint: ask Bob",
    "Your password: ${DB_PASSWORD}; token: null; api_key: <your key here>",
    "The API key rotation is scheduled for Monday; the secret is out (figuratively).",
    "hf_hub_download and gh_cli are tools",
    "Authorization required before production deploys.",
    "Room 12B, seat 14C, confirmation code X7K9Q2, loyalty UA-MP 88213457",
    "key: value, id=ep-20261005-aa01bb02, at=2026-10-05T09:00:10Z",
    "Postgres 16 migration 0042_add_index_on_bookings failed: relation exists",
    "already redacted: password=[REDACTED:password] and [REDACTED:openai_key]",
    "Übersicht: İstanbul flight booked, seat 3A",
    "",
]


@pytest.mark.parametrize("text", NEGATIVE)
def test_innocent_strings_come_out_unchanged(text):
    out, kinds = redact(text)
    assert kinds == []
    assert out is text


def test_several_secrets_in_one_string_in_order():
    text = f"keys: {AWS_ID} then postgres://u:pw12345@h/db and {OPENAI} and {AWS_ID} again"
    out, kinds = redact(text)
    assert kinds == ["aws_access_key", "url_password", "openai_key"]
    assert out == (
        "keys: [REDACTED:aws_access_key] then postgres://u:[REDACTED:url_password]@h/db and "
        "[REDACTED:openai_key] and [REDACTED:aws_access_key] again"
    )


@pytest.mark.parametrize("template, secret, kind", POSITIVE[::3])
def test_redact_is_idempotent(template, secret, kind):
    once, _ = redact(template.replace("<S>", secret))
    twice, kinds = redact(once)
    assert twice == once
    assert kinds == []


@pytest.mark.parametrize("template, secret, kind", POSITIVE)
def test_marker_never_leaks_a_character_of_the_secret(template, secret, kind):
    out, _ = redact(template.replace("<S>", secret))
    # Take the markers out: what is left is exactly the template's own text.
    rest = MARKER_RE.sub("", out)
    assert rest == template.replace("<S>", "")
    for m in MARKER_RE.finditer(out):
        assert m.group(0) in {marker(k) for k in KINDS}


def test_redact_obj_nested():
    params = {
        "url": "postgres://atlas:Tr0ub4dor3@db:5432/atlas",
        "headers": {"Authorization": "Bearer abc123def456", "Accept": "application/json"},
        "env": [{"name": "OPENAI_API_KEY", "value": OPENAI}, {"name": "REGION", "value": "eu-west-1"}],
        "password": 123456,
        "db_password": "hunter2",
        "apiKey": AWS_ID,
        "credentials": {"user": "bob", "pass": "x"},
        "token": None,
        "secret": True,
        "tokens": 40,
        "max_tokens": 512,
        "session_key": "agent:assistant:main",
        "notes": ("free text", f"pasted {JWT}"),
        "count": 3,
    }
    out, kinds = redact_obj(params)
    assert out == {
        "url": "postgres://atlas:[REDACTED:url_password]@db:5432/atlas",
        "headers": {"Authorization": "[REDACTED:authorization]", "Accept": "application/json"},
        "env": [
            {"name": "OPENAI_API_KEY", "value": "[REDACTED:openai_key]"},
            {"name": "REGION", "value": "eu-west-1"},
        ],
        "password": "[REDACTED:password]",
        "db_password": "[REDACTED:password]",
        "apiKey": "[REDACTED:aws_access_key]",
        "credentials": "[REDACTED:secret]",
        "token": None,
        "secret": True,
        "tokens": 40,
        "max_tokens": 512,
        "session_key": "agent:assistant:main",
        "notes": ("free text", "pasted [REDACTED:jwt]"),
        "count": 3,
    }
    assert kinds == [
        "url_password", "authorization", "openai_key", "password", "aws_access_key", "secret", "jwt",
    ]
    assert params["password"] == 123456  # the input is not modified


def test_redact_obj_plain_values():
    assert redact_obj("nothing here") == ("nothing here", [])
    assert redact_obj(None) == (None, [])
    assert redact_obj([1, 2.5, OPENAI]) == ([1, 2.5, "[REDACTED:openai_key]"], ["openai_key"])


@pytest.mark.parametrize(
    "name, expected",
    [
        ("password", True), ("PASSWD", True), ("db_password", True), ("Secret", True),
        ("client_secret", True), ("token", True), ("accessToken", True), ("api_key", True),
        ("apikey", True), ("X-Api-Key", True), ("access_key", True), ("Authorization", True),
        ("private_key", True), ("aws_secret_access_key", True), ("auth", True), ("cookie", True),
        ("tokens", False), ("max_tokens", False), ("token_count", False), ("session_key", False),
        ("secret_name", False), ("key", False), ("keyword", False), ("author", False), ("id", False),
    ],
)
def test_is_secret_key(name, expected):
    assert is_secret_key(name) is expected


def test_typical_strings_come_back_untouched():
    # Dates, ids, prices, URLs and paths are not secrets. (Speed: benchmarks/text_speed.py, not a test.)
    rng = random.Random(5)
    words = (
        "the user asked to book a flight to Lisbon on Tuesday, aisle seat, vegetarian meal, "
        "hotel under $300 a night; deploy atlas to staging with Postgres 16 at "
        "2026-10-05T09:00:10Z see ep-20261129-3f2a9c1b key: value tokens=40 "
        "https://example.com/docs /srv/atlas/releases/current.tar.gz"
    ).split()
    texts = [" ".join(rng.choice(words) for _ in range(40))[:200] for _ in range(2_000)]
    for t in texts:
        out, kinds = redact(t)
        assert out is t and kinds == [], t
