"""Secret redaction: every kind caught, exact spans, no false positives, linear time."""

from __future__ import annotations

import json
import random
import string
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memtier_plugin.redact import (
    DEFAULT_MAX_CHARS, KINDS, MARKER_RE, TRUNCATION_RE, is_secret_key, marker, redact, redact_obj,
)
from memtier_plugin.redact.tokens import FORMATS  # the token table: every row needs a sample below

ROOT = Path(__file__).resolve().parents[1]


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


B62 = string.ascii_letters + string.digits
URLSAFE = B62 + "_-"
HEX = "0123456789abcdef"
B64 = B62 + "+/"
UUID = "3f2a9c1b-7d4e-4a5b-9c8d-1e2f3a4b5c6d"

# One sample per row of the token table, in the vendor's published shape: (kind, token).
VENDOR = [
    ("huggingface_token", _fake("api_org_", 34, string.ascii_letters)),
    ("ai_provider_key", _fake("gsk_", 52)),
    ("ai_provider_key", _fake("pplx-", 48)),
    ("ai_provider_key", _fake("r8_", 37)),
    ("ai_provider_key", _fake("xai-", 80)),
    ("ai_provider_key", _fake("fw_", 24)),
    ("aws_access_key", _fake("ABSK", 132, B64)),
    ("google_oauth", _fake("GOCSPX-", 28, URLSAFE)),
    ("google_oauth", _fake("ya29.", 120, URLSAFE)),
    ("google_oauth", _fake("1//0", 60, URLSAFE)),
    ("alibaba_key", _fake("LTAI", 20)),
    ("digitalocean_token", _fake("dop_v1_", 64, HEX)),
    ("digitalocean_token", _fake("doo_v1_", 64, HEX)),
    ("digitalocean_token", _fake("dor_v1_", 64, HEX)),
    ("cloudflare_key", _fake("v1.0-", 24, HEX) + "-" + _fake("", 146, HEX)),
    ("azure_secret", "xY7" + "8Q~" + _fake("", 34, B62 + "_~.-")),
    ("heroku_key", _fake("HRKU-AA", 58, URLSAFE)),
    ("flyio_token", _fake("fo1_", 43, URLSAFE)),
    ("flyio_token", _fake("fm2_", 140, B64) + "=="),
    ("vault_token", _fake("hvs.", 95, URLSAFE)),
    ("terraform_token", _fake("", 14) + ".atlasv1." + _fake("", 67, URLSAFE)),
    ("pulumi_token", _fake("pul-", 40, HEX)),
    ("doppler_token", _fake("dp.pt.", 43)),
    ("dynatrace_token", _fake("dt0c01.", 24) + "." + _fake("", 64)),
    ("databricks_token", _fake("dapi", 32, HEX)),
    ("planetscale_token", _fake("pscale_tkn_", 43, URLSAFE)),
    ("supabase_token", _fake("sbp_", 40, HEX)),
    ("render_key", _fake("rnd_", 32)),
    ("netlify_token", _fake("nfp_", 40)),
    ("tailscale_key", "tskey-auth-" + _fake("k", 11) + "-" + _fake("", 32)),
    ("openshift_token", _fake("sha256~", 43, URLSAFE)),
    ("scalingo_token", _fake("tk-us-", 48, URLSAFE)),
    ("clickhouse_key", _fake("4b1d", 38)),
    ("gitlab_token", _fake("glpat-", 20, URLSAFE)),
    ("gitlab_token", _fake("gldt-", 20, URLSAFE)),
    ("gitlab_token", _fake("glrt-", 20, URLSAFE)),
    ("grafana_token", _fake("glc_", 60, B64) + "="),
    ("grafana_token", _fake("glsa_", 32) + "_" + _fake("", 8, HEX)),
    ("grafana_token", _fake("eyJrIjoi", 70)),
    ("bitbucket_token", _fake("ATBB", 32)),
    ("atlassian_token", _fake("ATATT3", 177, URLSAFE) + "=" + _fake("", 8, "0123456789ABCDEF")),
    ("npm_token", _fake("npm_", 36)),
    ("pypi_token", _fake("pypi-AgEIcHlwaS5vcmc", 150, URLSAFE)),
    ("pypi_token", _fake("pypi-AgENdGVzdC5weXBpLm9yZw", 150, URLSAFE)),
    ("rubygems_token", _fake("rubygems_", 48, HEX)),
    ("nuget_key", _fake("oy2", 43, string.ascii_lowercase + string.digits)),
    ("clojars_token", _fake("CLOJARS_", 60)),
    ("dockerhub_token", _fake("dckr_pat_", 27, URLSAFE)),
    ("artifactory_key", _fake("AKCp", 69)),
    ("artifactory_key", _fake("cmVmd", 59)),
    ("sourcegraph_token", _fake("sgp_", 40, HEX)),
    ("sentry_token", _fake("sntrys_", 120, B64 + "=_")),
    ("sentry_token", _fake("sntryu_", 64, HEX)),
    ("prefect_token", _fake("pnu_", 36)),
    ("readme_token", _fake("rdme_", 70)),
    ("infracost_token", _fake("ico-", 32)),
    ("linear_key", _fake("lin_api_", 40)),
    ("notion_token", _fake("ntn_", 46)),
    ("notion_token", _fake("secret_", 43)),
    ("postman_key", _fake("PMAK-", 24, HEX) + "-" + _fake("", 34, HEX)),
    ("figma_token", _fake("figd_", 40, URLSAFE)),
    ("typeform_token", _fake("tfp_", 59)),
    ("frameio_token", _fake("fio-u-", 64, URLSAFE)),
    ("contentful_token", _fake("CFPAT-", 43, URLSAFE)),
    ("harness_key", _fake("pat.", 22, URLSAFE) + "." + _fake("", 24) + "." + _fake("", 20)),
    ("airtable_token", _fake("pat", 14) + "." + _fake("", 64, HEX)),
    ("settlemint_token", _fake("sm_pat_", 16)),
    ("authress_key", "sc_" + _fake("", 10) + "." + _fake("", 5) + ".acc_" + _fake("", 20, HEX + "-") + "."
     + _fake("", 50, HEX)),
    ("slack_token", _fake("xoxe.xoxp-1-", 160)),
    ("slack_token", "xapp-1-A0123456789-1234567890123-" + _fake("", 64, HEX)),
    ("sendgrid_key", _fake("SG.", 22, URLSAFE) + "." + _fake("", 43, URLSAFE)),
    ("sendinblue_key", _fake("xkeysib-", 64, HEX) + "-" + _fake("", 16)),
    ("mailgun_key", _fake("key-", 32, HEX)),
    ("mailchimp_key", _fake("", 32, HEX) + "-us12"),
    ("twilio_key", _fake("SK", 32, HEX)),
    ("stripe_key", _fake("whsec_", 32)),
    ("square_token", _fake("sq0atp-", 22, URLSAFE)),
    ("square_token", _fake("EAAA", 60, URLSAFE)),
    ("facebook_token", _fake("EAAB", 120)),
    ("shopify_token", _fake("shpat_", 32, HEX)),
    ("shopify_token", _fake("shpss_", 32, HEX)),
    ("shopify_token", _fake("shpca_", 32, HEX)),
    ("shopify_token", _fake("shppa_", 32, HEX)),
    ("shippo_token", _fake("shippo_live_", 40, HEX)),
    ("easypost_key", _fake("EZAK", 54)),
    ("duffel_token", _fake("duffel_test_", 43)),
    ("flutterwave_key", _fake("FLWSECK_TEST-", 32, HEX) + "-X"),
    ("adobe_secret", _fake("p8e-", 32)),
    ("newrelic_key", _fake("NRAK-", 27, string.ascii_uppercase + string.digits)),
    ("mapbox_token", _fake("sk.eyJ", 60, URLSAFE) + "." + _fake("", 22, URLSAFE)),
    ("intra42_secret", _fake("s-s4t2ud-", 64, HEX)),
    ("yandex_key", _fake("AQVN", 36, URLSAFE)),
    ("maxmind_key", _fake("", 6) + "_" + _fake("", 29) + "_mmk"),
    ("age_secret_key", _fake("AGE-SECRET-KEY-1", 58, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L")),
    ("onepassword_token", _fake("ops_eyJ", 260, B64) + "="),
    ("onepassword_token", "A3-ASWWYB-798JRYLJVD4-23DC2-86TVM-H43EB"),
    ("discord_token", _fake("M", 25, URLSAFE) + "." + _fake("", 6, URLSAFE) + "." + _fake("", 38, URLSAFE)),
    # issue 30: newer vendor formats (gitleaks' and vendors' published shapes)
    ("ai_provider_key", _fake("sk-or-v1-", 64, HEX)),  # OpenRouter
    ("ai_provider_key", _fake("sk_", 48, HEX)),  # ElevenLabs
    ("ai_provider_key", _fake("lsv2_pt_", 32, HEX) + "_" + _fake("", 10, HEX)),  # LangSmith
    ("ai_provider_key", _fake("pcsk_", 70, B62 + "_")),  # Pinecone
    ("ai_provider_key", _fake("tvly-dev-", 32)),  # Tavily
    ("aws_access_key", "bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t" + _fake("", 120, B64)),
    ("azure_key", _fake("", 52) + "JQQJ9" + _fake("", 27)),
    ("vercel_token", _fake("vcp_", 40)),
    ("neon_token", _fake("napi_", 64)),
    ("infisical_token", "st." + _fake("", 8, HEX) + "-" + _fake("", 4, HEX) + "-4" + _fake("", 3, HEX) + "-a"
     + _fake("", 3, HEX) + "-" + _fake("", 12, HEX) + "." + _fake("", 32, HEX) + "." + _fake("", 32, HEX, seed=2)),
    ("yandex_key", _fake("t1.", 60, URLSAFE) + "." + _fake("", 86, URLSAFE)),
    ("sonarqube_token", _fake("squ_", 40, HEX)),
    ("sonarqube_token", _fake("sqp_", 40, HEX)),
    ("buildkite_token", _fake("bkua_", 40, HEX)),
    ("circleci_token", _fake("CCIPAT_", 22) + "_" + _fake("", 40, HEX)),
    ("octopus_key", _fake("API-", 26, string.ascii_uppercase + string.digits)),
    ("posthog_key", _fake("phx_", 47)),
    ("honeycomb_key", _fake("hcaik_", 58)),
    ("defined_networking_token", _fake("dnkey-", 26, HEX) + "-" + _fake("", 52, HEX)),
    ("plaid_token", "access-sandbox-" + _fake("", 8, HEX) + "-" + _fake("", 4, HEX) + "-" + _fake("", 4, HEX) + "-"
     + _fake("", 4, HEX) + "-" + _fake("", 12, HEX)),
    ("lob_key", _fake("live_", 35, HEX)),
    ("resend_key", _fake("re_", 8) + "_" + _fake("", 24)),
    ("dropbox_token", _fake("sl.u.", 400, URLSAFE)),
    ("jwt", "ZXlKaGJHY2lPaUpJVXpJMU5pSXNJblI1Y0NJNklrcFhWQ0o5" + _fake("", 80, B64)),
]


@pytest.mark.parametrize("kind, token", VENDOR, ids=[f"{k}-{i}" for i, (k, _) in enumerate(VENDOR)])
def test_each_vendor_token_is_redacted_exactly(kind, token):
    for template in ("found <S> in the log", 'export KEY="<S>"', "<S>"):
        text = template.replace("<S>", token)
        out, kinds = redact(text)
        assert out == template.replace("<S>", marker(kind)), text
        assert kinds == [kind]
        assert redact(out) == (out, [])


def test_every_row_of_the_token_table_has_a_sample():
    samples = [t for _, t in VENDOR] + [s for _, s, _ in POSITIVE]
    dead = [f for f in FORMATS if not any(f.regex.fullmatch(t) for t in samples)]
    assert dead == []


# Formats the issue names, each in a sentence: (template, secret, kind).
NAMED = [
    ("git clone https://oauth2:<S>@gitlab.com/acme/atlas.git", _fake("glpat-", 20, URLSAFE, seed=2), "gitlab_token"),
    ("GITLAB_TOKEN=<S> make release", _fake("glpat-", 20, URLSAFE, seed=3), "gitlab_token"),
    ('{"sendgrid": "<S>"}', _fake("SG.", 22, URLSAFE, seed=2) + "." + _fake("", 43, URLSAFE, seed=2), "sendgrid_key"),
    ("//registry.npmjs.org/:_authToken=<S>", _fake("npm_", 36, seed=2), "npm_token"),
    ("twine upload -u __token__ -p <S> dist/*", _fake("pypi-AgEIcHlwaS5vcmc", 90, URLSAFE), "pypi_token"),
    ("X-Shopify-Access-Token: <S>", _fake("shpat_", 32, HEX, seed=2), "shopify_token"),
    ("doctl auth init -t <S>", _fake("dop_v1_", 64, HEX, seed=2), "digitalocean_token"),
    ("card <S> exp 12/27", "4111 1111 1111 1111", "card_number"),
    ("card <S>, cvc 123", "4111-1111-1111-1111", "card_number"),
    ("pay with <S> today", "5555555555554444", "card_number"),
    ("amex <S>.", "3782 822463 10005", "card_number"),
    ("my password is <S>", "hunter2", "password"),
    ("My password is <S>.", "swordfish", "password"),
    ("the wifi password is '<S>' ok", "correct horse", "password"),
    ("the passcode for the door is <S>", "8842", "password"),
    ("my PIN is <S>, don't share it", "4471", "password"),
    ("the api key for staging is <S>", "ab12cd34ef56", "api_key"),
    ("the token is <S> for now", "abc123xyz789", "token"),
    ("our secret is <S>", "Blue-Moon-77", "secret"),
    ("git push --token <S> origin", "t0k3nValue99", "token"),
    ("deploy --password=<S> --yes", "Winter2026!", "password"),
    ("tool --api-key <S> --region eu", "k9X2mQ7vL4", "api_key"),
    ("vault write --client-secret <S>", "cs-8812-zz", "secret"),
    ("login --password '<S>'", "two words", "password"),
    ("mysql -u root -p<S> atlas", "s3cretpw", "password"),
    ("mysqldump -h db -u root -p <S> atlas", "s3cretpw", "password"),
    ("FOO_TOKEN=<S> ./run.sh", "abcdef123456", "token"),
    ("export DB_PASS=<S>", "plain-pass", "password"),
    ("curl -u admin:<S> https://api.example.com", "pa55word", "password"),
    ("redis-cli -a <S> ping", "r3dispw", "password"),
    ("docker login -u bob -p <S> registry.example.com", "dckpw123", "password"),
    ("sshpass -p '<S>' ssh deploy@host", "ssh pw", "password"),
    ("<password><S></password>", "s3cret", "password"),
    ("config: password=<S>", "hunter2", "password"),
    ("notify https://hooks.slack.com/services/<S> now", "T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
     "slack_webhook"),
    ("https://discord.com/api/webhooks/<S>", "123456789012345678/" + _fake("", 68, URLSAFE), "discord_webhook"),
    ("https://acme.webhook.office.com/webhookb2/<S>",
     f"{UUID}@{UUID}/IncomingWebhook/{_fake('', 32, HEX)}/{UUID}", "teams_webhook"),
    ("bot <S> ok", "123456789:AA" + _fake("", 33, URLSAFE), "telegram_token"),
]

# Formats no rule of the table names: caught by context words and entropy.
UNNAMED = [
    ("ZORP_API_KEY=<S>", "zp1-9fK2mP7xL4vN8bR3", "api_key"),
    ("<S> was pasted", "qz_live_8fK2mP9xL4vN7bR3tY6wQ1sD5gH0jC", "high_entropy"),
    ("X-Acme-Signature: <S>", "7a9F3kQ2mZ8xL1vB6nR4tY0wP5sD", "high_entropy"),
    ("acme.session.cookie = <S>", "Zk3Lq9Xw2Pv7Rt5Yn8Bm4Hc6", "high_entropy"),
    ("zorp-cli --acme-auth <S> sync", "Rt5Yn8Bm4Hc6Jd1Gf0Sa", "high_entropy"),
    ("the blob <S> came back", "q8Fj2LmZ0xR7tYpW3kVbN6cHs9DgA1eU5iO4", "high_entropy"),
    ("curl -H 'X-Zorp-Key: <S>' https://zorp.io", "k9X2mQ7vL4nB8rT3yW6pS1dF5", "high_entropy"),
    ("<zorpToken><S></zorpToken>", "ZxV81kLq", "token"),
    ("export ZORP_CREDENTIALS=<S>", "plainpass", "secret"),
    ("zorp:\n  secret_key: <S>\n", "whatever-it-is", "secret"),
    ("const zorpPassword = '<S>';", "S3cure!pass", "password"),
    ("zorp.hmac = <S>", "a8f5f167f44f4964e6c998dee827110c9d1e5fa3", "high_entropy"),
    ("ZORP_SECRET_VALUE=<S>", "abc", "secret"),
]


@pytest.mark.parametrize("template, secret, kind", NAMED + UNNAMED,
                         ids=[f"{k}-{i}" for i, (_, _, k) in enumerate(NAMED + UNNAMED)])
def test_named_and_unnamed_formats_are_redacted_exactly(template, secret, kind):
    text = template.replace("<S>", secret)
    out, kinds = redact(text)
    assert out == template.replace("<S>", marker(kind))
    assert kinds == [kind]
    assert redact(out) == (out, [])  # idempotent: markers are never re-redacted


def test_a_command_inside_another_commands_arguments_keeps_its_own_flags():
    out, kinds = redact("redis-cli -a r3dispw ping:mysqldump -h db -u root -p s3cretpw atlas")
    assert out == "redis-cli -a [REDACTED:password] ping:mysqldump -h db -u root -p [REDACTED:password] atlas"
    assert kinds == ["password"]


def test_long_texts_are_redacted_like_short_ones():
    # Past a few KB the detectors find their trigger words another way (str.find); same result.
    pad = "the user asked to book a flight to Lisbon; key: value, tokens=40, see /srv/atlas.\n" * 60
    for template, secret, kind in NAMED + UNNAMED:
        out, kinds = redact(pad + template.replace("<S>", secret))
        assert out == pad + template.replace("<S>", marker(kind)), template
        assert kinds == [kind]


def test_every_kind_is_covered_by_the_table():
    covered = {k for *_, k in POSITIVE + NAMED + UNNAMED} | {k for k, _ in VENDOR}
    assert covered == set(KINDS)


@pytest.mark.parametrize("text", [
    # numbers that are not cards: bad check digit, not a card network, too long, grouped oddly
    "card 4111 1111 1111 1112 declined", "order 1234567890123456 shipped", "ts 1700000000000 ms",
    "call +1 415 555 2671 or 415-555-2671", "ISBN 978-3-16-148410-0", "id 12345678901234567890123",
    "amounts: 4111 1111 1111 1111 1111 2222", "4111 11111 11111 111",
    # free text about passwords, not a password
    "the password is wrong.", "Password is required", "the password is sent by email",
    "My password is too short", "the api key is stored in vault", "The token budget is 4000 tokens",
    "the token is 4000 chars long", "the pin is red", "the secret is out (figuratively).",
    "the password for the account is unknown",
    # flags and commands without a secret
    "mkdir -p build/out", "ssh -p 2222 deploy@host", "git add -p", "docker run -p 8080:80 img",
    "python -m pytest -p no:cacheprovider", "docker login --password-stdin < pw.txt",
    "tool --token-file /run/secrets/t", "ssh --private-key ~/.ssh/id_ed25519", "curl -u admin https://x",
    "llm --max-tokens 512 --temperature 0.2", "kubectl get secret my-secret -o yaml",
    # identifiers, hashes and code
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "integrity 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "_TOKEN = re.compile(r'[a-z]+')", "_by_token: dict[str, set[str]] = field(default_factory=dict)",
    "api_key_env: OPENAI_API_KEY", "password: ${DB_PASSWORD}", "password: {password}",
    "postgres://atlas_app:...@db", 'return {"Authorization": f"Bearer {key}"}',
    "``Authorization: Bearer`` header", "{token: logprob} of the top alternatives",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl bob@host",
    "TestRedactIsIdempotentForEveryKindOfSecret2 passed",
    "public_key: 8f3a9c1b2d4e6f708192a3b4c5d6e7f8", "primary_key: 1700000000",
    "/srv/atlas/releases/20261005T0930Z/static/js/app.3f2a9c1bD8e7.chunk.js",
    "fe80::1ff:fe23:4567:890a and 00:1B:44:11:3A:B7 and #1a2B3c",
])
def test_more_innocent_strings_come_out_unchanged(text):
    out, kinds = redact(text)
    assert kinds == []
    assert out is text


def _corpus() -> list[Path]:
    """Real prose and code of this repository (the redaction modules and tests hold sample secrets)."""
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "config").glob("*")),
             *sorted((ROOT / "hooks").rglob("*.py")), *sorted((ROOT / "memtier_plugin").rglob("*.py")),
             *sorted((ROOT / "workspace-fixtures").rglob("README.md")),
             *sorted((ROOT / "workspace-fixtures" / "eval").glob("*.json")),
             *sorted((ROOT / "workspace-fixtures" / "attribution").glob("*.jsonl")),
             *sorted((ROOT / "workspace-fixtures" / "golden").glob("*"))]
    own = ROOT / "memtier_plugin" / "redact"
    return [f for f in files if f.is_file() and own not in f.parents]


@pytest.mark.parametrize("path", _corpus(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_repositorys_own_prose_and_code_is_untouched(path):
    text = path.read_text(encoding="utf-8")
    out, kinds = redact(text)
    changed = [(a, b) for a, b in zip(text.splitlines(), out.splitlines()) if a != b]
    assert (kinds, changed) == ([], [])


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


# --------------------------------------------------------------------------
# Linear time: no input makes redaction rescan. Each input is timed at n/4 and
# n characters (best of 3, CPU time of this process): a linear redactor grows
# about 4x, a quadratic one 16x. The bound is generous for a noisy machine.


def _json_blob(n: int) -> str:
    rng = random.Random(3)
    rows, size = [], 0
    while size < n:
        row = {"id": f"ep-2026{rng.randrange(10**4):04d}-{rng.getrandbits(32):08x}", "token_count": rng.randrange(4000),
               "sha": f"{rng.getrandbits(160):040x}", "path": f"/srv/atlas/{rng.randrange(1000)}/app.js",
               "password": "", "key": "value=" * 3, "text": "the user asked to book a flight, key: value tokens=40"}
        rows.append(json.dumps(row))
        size += len(rows[-1]) + 2
    return ("[" + ", ".join(rows) + "]")[:n]


def _mixed_run(n: int) -> str:
    rng = random.Random(9)
    return "".join(rng.choice(B62 + "+/") for _ in range(n))


HOSTILE = {
    "equals": lambda n: "=" * n,
    "a=": lambda n: "a=" * (n // 2),
    "token=": lambda n: ("token=" * n)[:n],
    "password: ": lambda n: ("password: " * n)[:n],
    "key": lambda n: ("key" * n)[:n],
    "api_key=\"": lambda n: ('api_key="' * n)[:n],
    "sk-": lambda n: ("sk-" * n)[:n],
    "glpat-": lambda n: ("glpat-" * n)[:n],
    "ATATT3=": lambda n: (("ATATT3" + "a" * 20 + "=") * n)[:n],
    "eyJ.": lambda n: ("eyJa." * n)[:n],
    "://a:": lambda n: ("://a:" * n)[:n],
    "-----BEGIN": lambda n: ("-----BEGIN RSA PRIVATE KEY-----" * n)[:n],
    "--token ": lambda n: ("--token " * n)[:n],
    "mysql -p ": lambda n: ("mysql -p " * n)[:n],
    "my password is ": lambda n: ("my password is " * n)[:n],
    "4111 ": lambda n: ("4111 " * n)[:n],
    "digits": lambda n: "4" * n,
    "letters": lambda n: "a" * n,
    "base64 run": _mixed_run,
    "markers": lambda n: ("[REDACTED:token]" * n)[:n],
    "json 150 KB": _json_blob,
    # issue 30's rules
    "://a:b/c@": lambda n: ("://a:b/c@" * n)[:n],
    "machine x password": lambda n: ("machine x login y password " * n)[:n],
    ":1:": lambda n: ("h:1:" * n)[:n],
    "h:5432:d:u:p ": lambda n: ("h:5432:d:u:p " * n)[:n],
    "login(\"": lambda n: ('login("a", "' * n)[:n],
    "set_token(": lambda n: ("set_token(" * n)[:n],
    "add key value": lambda n: ('key="Password" value="' * n)[:n],
    "(\"": lambda n: ('f("Qw8Er7Ty6Ui5Op4As3Df2GhJk", ' * n)[:n],
    "cookie: a=b; ": lambda n: ("cookie: sid=b; " * n)[:n],
    "openssl -k ": lambda n: ("openssl -k x -pass pass:" * n)[:n],
    "configure set ": lambda n: ("aws configure set token " * n)[:n],
}


def _cpu_time(text: str) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        redact(text)
        best = min(best, time.process_time() - start)
    return best


@pytest.mark.parametrize("name", list(HOSTILE))
def test_redaction_time_is_linear(name):
    n = 150_000 if name.startswith("json") else 200_000
    small, large = HOSTILE[name](n // 4), HOSTILE[name](n)
    t_small, t_large = _cpu_time(small), _cpu_time(large)
    assert t_large < 2.0, f"{name}: {t_large:.2f} s for {n} characters"
    # 4x the input may take at most 8x the time (quadratic would be 16x); tiny
    # times are dominated by noise, so the ratio is checked from 20 ms on.
    assert t_large < max(8 * t_small, 0.02), f"{name}: {t_small:.4f} s -> {t_large:.4f} s"


# --------------------------------------------------------------------------
# The cap: callers truncate before redacting.


def test_max_chars_cuts_marks_and_drops_a_token_cut_in_half():
    token = _fake("glpat-", 20, URLSAFE, seed=5)
    text = "log line " * 10 + token + " and more text after it" * 50
    cut_at = text.index(token) + 12  # in the middle of the token
    out, kinds = redact(text, max_chars=cut_at)
    assert out == "log line " * 10 + f"[TRUNCATED:{len(text) - len('log line ' * 10)} chars]"
    assert "glpat" not in out and kinds == []
    assert TRUNCATION_RE.search(out)
    assert redact(out) == (out, [])  # the mark is not mistaken for anything


def test_max_chars_redacts_what_it_keeps():
    token = _fake("npm_", 36, seed=4)
    text = f"publish with {token} then wait " + "x" * 10_000
    out, kinds = redact(text, max_chars=200)
    assert out.startswith("publish with [REDACTED:npm_token] then wait ")
    assert out.endswith(" chars]") and kinds == ["npm_token"]
    assert redact(text, max_chars=len(text)) == redact(text)  # no cut: the same as without a cap
    short = "nothing to see"
    assert redact(short, max_chars=DEFAULT_MAX_CHARS)[0] is short


def test_max_chars_applies_to_each_string_of_an_object():
    out, kinds = redact_obj({"stdout": "a" * 500, "note": "pw " + OPENAI}, max_chars=100)
    assert out["stdout"] == "[TRUNCATED:500 chars]"  # a run cut in half is dropped whole
    assert out["note"] == "pw [REDACTED:openai_key]" and kinds == ["openai_key"]


def test_max_chars_must_not_be_negative():
    with pytest.raises(ValueError, match="max_chars"):
        redact("some text", max_chars=-1)


# --------------------------------------------------------------------------
# The public path: `memtier add` writes no secret to the ledger.


def test_memtier_add_never_writes_the_secrets_to_the_ledger(tmp_path):
    secrets = {
        "gitlab": _fake("glpat-", 20, URLSAFE, seed=11),
        "sendgrid": _fake("SG.", 22, URLSAFE, seed=11) + "." + _fake("", 43, URLSAFE, seed=11),
        "card": "4111 1111 1111 1111",
        "password": "hunter2x",
        "flag": "t0k3nValue99",
    }
    text = (f"clone with {secrets['gitlab']}, mail key {secrets['sendgrid']}, card {secrets['card']}; "
            f"my password is {secrets['password']} and run `deploy --token {secrets['flag']}`")
    proc = subprocess.run(
        [sys.executable, "-m", "memtier_plugin", "-w", str(tmp_path), "add", text,
         "--agent", "a", "--session", "s", "--project", "p"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    ledgers = list((tmp_path / "memory").rglob("*.jsonl"))
    assert ledgers, "memtier add wrote no ledger"
    data = b"".join(p.read_bytes() for p in ledgers)
    for name, secret in secrets.items():
        assert secret.encode() not in data, name
    record = json.loads(data.splitlines()[-1])
    assert set(record["provenance"]["redacted"]) == {"gitlab_token", "sendgrid_key", "card_number",
                                                     "password", "token"}


# --------------------------------------------------------------------------
# Issue 30: rarer shapes, one test each (template, secret, kind), exact spans.

ISSUE30 = [
    # URL passwords holding a raw '#', '/' or '?' (the password runs to the '@' a host follows)
    ("postgres://app:<S>@db.internal:5432/pay", "ab/cd#ef", "url_password"),
    ("DATABASE_URL is mysql://root:<S>@10.0.0.7/pay", "p#ss/w?rd9", "url_password"),
    ("redis://:<S>@cache:6379", "x/y#z@w", "url_password"),
    # credential files: .netrc (one line, several lines), .pgpass, .NET config
    ("machine api.heroku.com login me@example.com password <S>", "01234567-89ab-cdef-0123-456789abcdef", "password"),
    ("machine git.example.com\n  login ci-bot\n  password <S>\n", "n3trcPass", "password"),
    ("default login anonymous password <S>", "guestpass1", "password"),
    ("localhost:5432:payments:app:<S>", "Pg#pass-42", "password"),
    ("echo '*:*:*:postgres:<S>' >> ~/.pgpass", "s3cr3t", "password"),
    ("db.internal:*:*:app:<S>\n", "hunter2", "password"),
    ('<add key="ClearTextPassword" value="<S>" />', "NuG3tPass!", "password"),
    ('<add key="StripeApiKey" value="<S>"/>', "plain-value-here", "api_key"),
    # tokens passed as positional arguments in code
    ('client.login("admin", "<S>")', "hunter2secret", "password"),
    ('ftp.login("deploy", "<S>")', "Ftp-pass-77", "password"),
    ('session.auth = ("deploy", "<S>")', "hunter2secret", "password"),
    ('requests.get(url, auth=("user", "<S>"))', "hunter2secret", "password"),
    ('HTTPBasicAuth("user", "<S>")', "hunter2secret", "password"),
    ('keyring.set_password("atlas", "ci", "<S>")', "hunter2secret", "password"),
    ('vault.with_token("<S>")', "s.dev-root-4471", "token"),
    ('client = Client("<S>")', "Qw8Er7Ty6Ui5Op4As3Df2GhJk", "high_entropy"),
    ('Stripe("acct_1", "<S>")', "Zx9Cv8Bn7Mm6Ll5Kk4Jj3Hh2", "high_entropy"),
    # long hex and UUID secrets in credential positions (weakly named values, flags)
    ("key: <S>", "123e4567-e89b-42d3-a456-426614174000", "high_entropy"),
    ("heroku --key <S>", "3f2a9c1b8e7d6c5b4a39", "high_entropy"),
    ("X-Auth: <S>", "3f2a9c1b8e7d6c5b", "high_entropy"),
    ('{"hmac": "<S>"}', "a8f5f167f44f4964e6c998dee827110c", "high_entropy"),
    ("cookie=<S>", "6F9619FF-8B86-D011-B42D-00C04FC964FF", "high_entropy"),
    # session cookies, openssl passphrases, aws configure set (probes beyond the issue's list)
    ("Cookie: sessionid=<S>; theme=dark", "8f2kq9x7lm3vz0p1", "secret"),
    ("Set-Cookie: _gitlab_session=<S>; path=/; HttpOnly", "3f2a9c1b8e7d6c5b4a3928170f6e5d4c", "secret"),
    ("openssl enc -aes-256-cbc -k <S> -in f", "mypassphrase123", "password"),
    ("openssl pkcs12 -export -passout pass:<S> -out x.p12", "Exp0rtPw", "password"),
    ("aws configure set aws_secret_access_key <S>", AWS_SECRET, "aws_secret_key"),
]


@pytest.mark.parametrize("template, secret, kind", ISSUE30, ids=[f"{k}-{i}" for i, (_, _, k) in enumerate(ISSUE30)])
def test_issue30_shapes_are_redacted_exactly(template, secret, kind):
    text = template.replace("<S>", secret)
    out, kinds = redact(text)
    assert out == template.replace("<S>", marker(kind)), text
    assert kinds == [kind]
    assert redact(out) == (out, [])


ISSUE30_INNOCENT = [
    "open http://localhost:8080/@vite/client and https://medium.com/@user/post",
    "see https://registry.npmjs.org:443/@scope/pkg for the package",
    "the machine learning team will reset the password tomorrow",
    "at 10:30:45:12:99 the job ran; ratio 1:2:3:4:5",
    "keyring.get_password(\"atlas\", \"ci\") and os.getenv(\"DB_PASSWORD\")",
    "login(username, password) then logout()",
    "token_count(text) returns len(tokens); get_secret(\"prod/db\")",
    "session_id: 3f2a9c1b8e7d6c5b and request id 123e4567-e89b-42d3-a456-426614174000",
    "commit: 4f1c2a9b8e7d6c5b4a3928170f6e5d4c3b2a1908 and uuid=123e4567-e89b-12d3-a456-426614174000",
    'print("the quick brown fox jumps over the lazy dog")',
    "aws configure set region us-east-1; the cookie: chocolate chip, and the session was fine",
    "openssl rand -hex 32 and Set-Cookie: theme=dark; path=/",
]


@pytest.mark.parametrize("text", ISSUE30_INNOCENT)
def test_issue30_rules_leave_innocent_strings(text):
    assert redact(text) == (text, [])
