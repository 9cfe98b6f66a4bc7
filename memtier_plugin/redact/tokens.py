"""What a secret token looks like: vendor formats, entropy, card numbers, key blocks.

This is the part of redaction that needs no context: a string that is, by its
own shape, a credential. :mod:`memtier_plugin.redact` combines it with
:mod:`memtier_plugin.redact.context` (where the text *says* a secret follows).

* :data:`FORMATS`: about 120 vendor token shapes with a recognisable prefix or
  infix (OpenAI, Anthropic, AWS, GitHub, GitLab, Slack, Stripe, Google, Hugging
  Face, SendGrid, npm, PyPI, Shopify, DigitalOcean, Twilio, Mailgun, HashiCorp
  Vault, Grafana, Databricks, Doppler, Atlassian, 1Password, age, Docker Hub,
  ... and JWTs): one row per family, a kind, the literal prefixes and the
  pattern of the whole token. The families are those of the maintained
  scanners' rule sets (gitleaks' default rules, detect-secrets' plugins) that
  have a fixed shape, written from the vendors' published formats.
* Entropy alone (:func:`generic_token`): a long token close to random.
* PEM private key blocks, webhook URLs (Slack, Discord, Teams), Telegram bot
  tokens, and payment card numbers (13-19 digits, a card network's prefix and
  length, a valid Luhn check digit, so ordinary long numbers stay).

Linear time: candidate tokens are the maximal runs of token characters, found
by one regex pass; each run is classified once (a dict lookup on its first two
characters, then one bounded pattern). Every other pattern here either starts
with a literal or a character class the engine can skip to, and has bounded
width or consumes what it scans.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import NamedTuple

# Span priorities: lower wins when spans overlap (tokens are most specific, by
# table order), then key blocks, then context, then entropy alone.
P_PEM, P_CONTEXT, P_GEN = 200, 201, 202


# --------------------------------------------------------------------------
# The token table


class _Format(NamedTuple):
    kind: str
    prefixes: tuple[str, ...]  # the token starts with one of these (none: see infix)
    regex: re.Pattern[str]
    infix: str = ""  # for shapes without a prefix: a substring every token contains
    first: str = ""  # ... and the characters it can start with ("" = any)


def _fmt(kind: str, prefixes: str, body: str, *, flags: int = 0) -> _Format:
    pres = tuple(prefixes.split())
    alt = "|".join(re.escape(p) for p in pres)
    return _Format(kind, pres, re.compile(f"(?:{alt}){body}", flags))


def _shape(kind: str, infix: str, pattern: str, first: str = "") -> _Format:
    return _Format(kind, (), re.compile(pattern), infix, first)


_B62 = "[A-Za-z0-9]"

_URLSAFE = r"[A-Za-z0-9_\-]"

_HEX = "[a-f0-9]"

_HEXI = "[a-fA-F0-9]"

_B64 = "[A-Za-z0-9+/]"

FORMATS: tuple[_Format, ...] = (
    # AI providers
    _fmt("anthropic_key", "sk-ant-", f"{_URLSAFE}{{20,300}}"),
    # (not memtier's own skill ids, "sk-20261102-f6f70df29ccf": store/paths.new_id's shape, cited in hooks' answers)
    _fmt("openai_key", "sk-", r"(?!\d{8}-[0-9a-f]{12}(?![A-Za-z0-9_-]))"
         f"(?:proj-|svcacct-|admin-)?(?=[A-Za-z0-9_-]*[0-9]){_URLSAFE}{{20,300}}"),
    _fmt("huggingface_token", "hf_ api_org_", f"{_B62}{{30,80}}"),
    _fmt("ai_provider_key", "gsk_", f"{_B62}{{48,60}}"),  # Groq
    _fmt("ai_provider_key", "pplx-", f"{_B62}{{40,60}}"),  # Perplexity
    _fmt("ai_provider_key", "r8_", f"{_B62}{{30,45}}"),  # Replicate
    _fmt("ai_provider_key", "xai-", f"{_B62}{{60,100}}"),  # xAI
    _fmt("ai_provider_key", "fw_", f"{_B62}{{20,40}}"),  # Fireworks
    _fmt("ai_provider_key", "sk-or-v1-", f"{_HEX}{{64}}"),  # OpenRouter
    _fmt("ai_provider_key", "sk_", f"{_HEX}{{48}}"),  # ElevenLabs
    _fmt("ai_provider_key", "lsv2_pt_ lsv2_sk_", f"{_HEX}{{32}}_{_HEX}{{10}}"),  # LangSmith
    _fmt("ai_provider_key", "pcsk_", r"[A-Za-z0-9_]{40,120}"),  # Pinecone
    _fmt("ai_provider_key", "tvly-", r"[A-Za-z0-9\-]{28,64}"),  # Tavily
    # Cloud
    _fmt("aws_access_key", "AKIA ASIA ABIA ACCA A3T", "[A-Z0-9]{16,17}"),
    _fmt("aws_access_key", "ABSK", f"{_B64}{{100,300}}={{0,2}}"),  # Bedrock API key
    _fmt("aws_access_key", "bedrock-api-key-", f"{_B64}{{40,3000}}={{0,2}}"),  # Bedrock short-term key
    _shape("azure_key", "JQQJ9", rf"{_B62}{{52}}JQQJ9{_B62}{{23,35}}={{0,2}}"),  # Azure keys (CASK: DevOps PAT, ...)
    _fmt("vercel_token", "vcp_ vci_ vca_ vcr_ vck_", f"{_B62}{{24,64}}"),
    _fmt("neon_token", "napi_", f"{_B62}{{64}}"),
    _fmt("infisical_token", "st.", rf"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}\.{_HEX}{{32}}\.{_HEX}{{32}}"),
    _fmt("yandex_key", "t1.", r"[A-Za-z0-9_\-]{40,300}={0,2}\.[A-Za-z0-9_\-]{86}={0,2}"),
    _fmt("google_api_key", "AIza", r"[0-9A-Za-z_\-]{35}"),
    _fmt("google_oauth", "GOCSPX-", rf"{_URLSAFE}{{24,40}}"),
    _fmt("google_oauth", "ya29.", rf"{_URLSAFE}{{20,2000}}"),
    _fmt("google_oauth", "1//0", rf"{_URLSAFE}{{20,500}}"),
    _fmt("alibaba_key", "LTAI", f"{_B62}{{12,30}}"),
    _fmt("digitalocean_token", "dop_v1_ doo_v1_ dor_v1_", f"{_HEX}{{64}}"),
    _fmt("cloudflare_key", "v1.0-", f"{_HEX}{{24}}-{_HEX}{{146}}"),
    _shape("azure_secret", "Q~", r"[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.\-]{31,34}"),
    _fmt("heroku_key", "HRKU-", rf"{_URLSAFE}{{20,80}}"),
    _fmt("flyio_token", "fo1_", rf"{_URLSAFE}{{40,50}}"),
    _fmt("flyio_token", "fm1a_ fm1r_ fm2_", f"{_B64}{{100,4000}}={{0,3}}"),
    _fmt("vault_token", "hvs. hvb. hvr.", rf"{_URLSAFE}{{24,400}}"),
    _shape("terraform_token", ".atlasv1.", rf"{_B62}{{14}}\.atlasv1\.[A-Za-z0-9_\-=]{{60,80}}"),
    _fmt("pulumi_token", "pul-", f"{_HEX}{{40}}"),
    _fmt("doppler_token", "dp.pt. dp.st. dp.ct. dp.sa. dp.scim. dp.audit.", f"{_B62}{{40,50}}"),
    _fmt("dynatrace_token", "dt0c01.", rf"{_B62}{{24}}\.{_B62}{{64}}"),
    _fmt("databricks_token", "dapi", f"{_HEX}{{32}}(?:-[0-9])?"),
    _fmt("planetscale_token", "pscale_tkn_ pscale_pw_ pscale_oauth_", r"[\w.=\-]{32,64}"),
    _fmt("supabase_token", "sbp_ sbp_oauth_ sb_secret_", rf"{_URLSAFE}{{30,60}}"),
    _fmt("render_key", "rnd_", f"{_B62}{{30,40}}"),
    _fmt("netlify_token", "nfp_ nfc_", rf"{_URLSAFE}{{30,50}}"),
    _fmt("tailscale_key", "tskey-", rf"[a-z]+-{_B62}{{8,40}}-{_B62}{{16,60}}"),
    _fmt("openshift_token", "sha256~", rf"{_URLSAFE}{{43}}"),
    _fmt("scalingo_token", "tk-us-", rf"{_URLSAFE}{{48}}"),
    _fmt("clickhouse_key", "4b1d", f"{_B62}{{38}}"),
    # Code hosting, registries, CI
    _fmt("github_token", "ghp_ gho_ ghu_ ghs_ ghr_", f"{_B62}{{30,255}}"),
    _fmt("github_token", "github_pat_", r"[A-Za-z0-9_]{22,255}"),
    _fmt("sonarqube_token", "squ_ sqp_ sqa_", f"{_HEX}{{40}}"),
    _fmt("buildkite_token", "bkua_", f"{_HEX}{{40}}"),
    _fmt("circleci_token", "CCIPAT_", rf"{_B62}{{22}}_{_HEX}{{40}}"),
    _fmt("octopus_key", "API-", "(?=[A-Z]*[0-9])[A-Z0-9]{26}"),
    _fmt("posthog_key", "phx_", f"{_B62}{{40,60}}"),
    _fmt("honeycomb_key", "hcaik_ hcxik_", f"{_B62}{{40,80}}"),
    _fmt("defined_networking_token", "dnkey-", r"[a-z0-9=_\-]{26}-[a-z0-9=_\-]{52}"),
    _fmt("gitlab_token", "glpat- gldt- glrt- glcbt- glptt- glft- glimt- glagent- gloas- glsoat- "
         "glffct- GR1348941", r"[\w.\-]{20,320}"),
    _fmt("grafana_token", "glc_", f"{_B64}{{32,400}}={{0,3}}"),
    _fmt("grafana_token", "glsa_", f"{_B62}{{32}}_{_HEXI}{{8}}"),
    _fmt("grafana_token", "eyJrIjoi", f"{_B62}{{60,400}}={{0,3}}"),
    _fmt("bitbucket_token", "ATBB ATCTT3", rf"[A-Za-z0-9_\-=]{{28,200}}"),
    _fmt("atlassian_token", "ATATT3", r"[A-Za-z0-9_\-=]{150,250}"),
    _fmt("npm_token", "npm_", f"{_B62}{{36}}"),
    _fmt("pypi_token", "pypi-AgEIcHlwaS5vcmc pypi-AgENdGVzdC5weXBpLm9yZw", rf"{_URLSAFE}{{50,1200}}"),
    _fmt("rubygems_token", "rubygems_", f"{_HEX}{{48}}"),
    _fmt("nuget_key", "oy2", "[a-z0-9]{43}"),
    _fmt("clojars_token", "CLOJARS_", f"{_B62}{{60}}"),
    _fmt("dockerhub_token", "dckr_pat_ dckr_oat_", rf"{_URLSAFE}{{24,60}}"),
    _fmt("artifactory_key", "AKCp", f"{_B62}{{60,80}}"),
    _fmt("artifactory_key", "cmVmd", f"{_B62}{{55,65}}"),
    _fmt("sourcegraph_token", "sgp_", rf"(?:{_HEXI}{{16}}_|local_)?{_HEXI}{{40}}"),
    _fmt("sentry_token", "sntrys_", rf"[A-Za-z0-9+/=_]{{60,600}}"),
    _fmt("sentry_token", "sntryu_ sntryi_", f"{_HEX}{{64}}"),
    _fmt("prefect_token", "pnu_", f"{_B62}{{36}}"),
    _fmt("readme_token", "rdme_", f"{_B62}{{70}}"),
    _fmt("infracost_token", "ico-", f"{_B62}{{32}}"),
    _fmt("linear_key", "lin_api_", f"{_B62}{{40}}"),
    _fmt("notion_token", "ntn_", f"{_B62}{{40,50}}"),
    _fmt("notion_token", "secret_", f"{_B62}{{43}}"),
    _fmt("postman_key", "PMAK-", f"{_HEXI}{{24}}-{_HEXI}{{34}}"),
    _fmt("figma_token", "figd_", rf"{_URLSAFE}{{38,50}}"),
    _fmt("typeform_token", "tfp_", r"[A-Za-z0-9_\-.=]{55,65}"),
    _fmt("frameio_token", "fio-u-", r"[A-Za-z0-9_\-=]{64}"),
    _fmt("contentful_token", "CFPAT-", rf"{_URLSAFE}{{43}}"),
    _fmt("harness_key", "pat. sat.", rf"{_URLSAFE}{{22}}\.{_B62}{{24}}\.{_B62}{{20}}"),
    _fmt("airtable_token", "pat", rf"{_B62}{{14}}\.{_HEX}{{64}}"),
    _fmt("settlemint_token", "sm_aat_ sm_pat_ sm_sat_", f"{_B62}{{16}}"),
    _fmt("authress_key", "sc_ ext_ scauth_ authress_", rf"{_B62}{{5,30}}\.{_B62}{{4,6}}\.acc[_-][a-z0-9\-]{{10,32}}"
         rf"\.[a-z0-9+/_=\-]{{30,120}}"),
    # Messaging, e-mail, payments, commerce
    _fmt("slack_token", "xoxa- xoxb- xoxe- xoxo- xoxp- xoxr- xoxs-", r"[A-Za-z0-9\-]{10,250}"),
    _fmt("slack_token", "xoxe.xoxb- xoxe.xoxp-", r"[A-Za-z0-9\-]{100,250}"),
    _fmt("slack_token", "xapp-", r"[0-9]-[A-Za-z0-9\-]{10,250}"),
    _fmt("sendgrid_key", "SG.", r"[\w\-]{16,32}\.[\w\-]{16,64}"),
    _fmt("sendinblue_key", "xkeysib- xsmtpsib-", f"{_HEX}{{64}}-{_B62}{{16}}"),
    _fmt("mailgun_key", "key- pubkey-", f"{_HEX}{{32}}"),
    _shape("mailchimp_key", "-us", f"{_HEX}{{32}}-us[0-9]{{1,2}}"),
    _fmt("twilio_key", "SK", f"{_HEXI}{{32}}"),
    _fmt("stripe_key", "sk_live_ sk_test_ sk_prod_ rk_live_ rk_test_ rk_prod_", f"{_B62}{{10,247}}"),
    _fmt("stripe_key", "whsec_", f"{_B62}{{24,64}}"),
    _fmt("square_token", "sq0atp- sq0csp-", rf"{_URLSAFE}{{22,60}}"),
    _fmt("square_token", "EAAA", rf"{_URLSAFE}{{56,80}}"),
    _fmt("facebook_token", "EAAB EAAC EAAG EAAM EAAI EAAJ", f"{_B62}{{80,500}}"),
    _fmt("shopify_token", "shpat_ shpss_ shpca_ shppa_", f"{_HEXI}{{32}}"),
    _fmt("shippo_token", "shippo_live_ shippo_test_", f"{_HEXI}{{40}}"),
    _fmt("easypost_key", "EZAK EZTK", f"{_B62}{{54}}"),
    _fmt("duffel_token", "duffel_test_ duffel_live_", r"[A-Za-z0-9_\-=]{43}"),
    _fmt("flutterwave_key", "FLWSECK_TEST- FLWSECK- FLWPUBK_TEST-", f"{_HEXI}{{12,32}}(?:-X)?"),
    _fmt("adobe_secret", "p8e-", f"{_B62}{{32}}"),
    _fmt("plaid_token", "access-sandbox- access-development- access-production-",
         rf"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}"),
    _fmt("lob_key", "live_ test_", f"{_HEX}{{35}}"),
    _fmt("resend_key", "re_", rf"{_B62}{{8}}_{_B62}{{24}}"),
    _fmt("dropbox_token", "sl.", r"(?:u\.)?[A-Za-z0-9_\-=]{130,1400}"),
    _fmt("newrelic_key", "NRAK- NRII- NRJS-", r"[A-Za-z0-9\-]{19,40}"),
    _fmt("mapbox_token", "sk.eyJ", r"[A-Za-z0-9_\-]{20,300}\.[A-Za-z0-9_\-]{20,60}"),
    _fmt("intra42_secret", "s-s4t2ud- s-s4t2af-", f"{_HEX}{{64}}"),
    _fmt("yandex_key", "AQVN", rf"{_URLSAFE}{{35,38}}"),
    _shape("maxmind_key", "_mmk", rf"{_B62}{{6}}_{_B62}{{29}}_mmk"),
    # Keys and key files
    _fmt("age_secret_key", "AGE-SECRET-KEY-1", "[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
    _fmt("onepassword_token", "ops_eyJ", f"{_B64}{{200,2000}}={{0,3}}"),
    _fmt("onepassword_token", "A3-", "[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}"),
    _fmt("jwt", "ZXlKaGJHY2lPaU ZXlKMGVYQWlPaU", f"{_B64}{{40,8000}}={{0,2}}"),  # a base64-encoded JWT
    _fmt("jwt", "eyJ", r"[A-Za-z0-9_\-]{5,4000}\.[A-Za-z0-9_\-]{5,8000}(?:\.[A-Za-z0-9_\-]{0,4000})?"),
    _shape("discord_token", ".", rf"[MNO][A-Za-z0-9_\-]{{23,27}}\.[A-Za-z0-9_\-]{{6}}\.[A-Za-z0-9_\-]{{27,40}}",
           first="MNO"),
)

#: Marker kinds of the table, in priority order.
FORMAT_KINDS: tuple[str, ...] = tuple(dict.fromkeys(f.kind for f in FORMATS))
_FORMAT_PRIO = {kind: i for i, kind in enumerate(FORMAT_KINDS)}
#: The other kinds this module writes.
OTHER_KINDS: tuple[str, ...] = ("private_key", "slack_webhook", "discord_webhook", "teams_webhook",
                                "telegram_token", "card_number", "high_entropy")

# Prefix dispatch: the first two characters (lowercased) -> (prefix, row) pairs,
# longest prefix first.
_BY_HEAD: dict[str, list[tuple[str, _Format]]] = {}
for _f in FORMATS:
    for _p in _f.prefixes:
        _BY_HEAD.setdefault(_p[:2].lower(), []).append((_p, _f))
for _rows in _BY_HEAD.values():
    _rows.sort(key=lambda pf: -len(pf[0]))
_INFIX = tuple(f for f in FORMATS if f.infix)

# A run of token characters: every token above lies inside one ('=' only as
# padding, or inside a token with a known prefix).
RUN_CHARS = r"A-Za-z0-9_\-+/.~"
_RUN_RE = re.compile(rf"[{RUN_CHARS}]{{16,}}={{0,3}}")
_RUN_EQ_RE = re.compile(rf"[{RUN_CHARS}=]{{0,1024}}")
_PIECE_SPLIT = re.compile(r"[/.]")
_LOWER_RUN_RE = re.compile(r"[a-z]{7}")
_INFIX_HINT = re.compile(r"Q~|\.atlasv1\.|-us[0-9]|_mmk|JQQJ9|^[MNO].{20,}\..{6}\.")
_DIGIT_RE = re.compile(r"[0-9]")
_ALNUM_RE = re.compile(r"(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]+")
_UUID_RE = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
# ``live_8fK2...``, ``xyz-test-...``: a short lowercase prefix, then the random part.
_PREFIXED_RE = re.compile(r"([a-z][a-z0-9]{1,11}(?:[_\-][a-z0-9]{1,11}){0,2}[_\-])([A-Za-z0-9]{20,})\Z")
_SSH_PUBLIC = ("AAAAB3NzaC1", "AAAAC3NzaC1", "AAAAE2VjZHNh")

# Key blocks, webhook URLs, bot tokens, card numbers.
_PEM_RE = re.compile(
    r"-----BEGIN[A-Z0-9 ]{0,64}PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
    r"(?:-----END[A-Z0-9 ]{0,64}PRIVATE KEY(?: BLOCK)?-----|\Z)"
)
_WEBHOOK_RE = re.compile(
    r"(?:hooks\.slack\.com/(?:services|workflows|triggers)/(?P<slack>[A-Za-z0-9+/_\-]{20,120})"
    r"|discord(?:app)?\.com/api/webhooks/(?P<discord>[0-9]{5,30}/[\w\-]{20,100})"
    r"|\.webhook\.office\.com/webhookb2/(?P<teams>[\w@/\-]{20,400}))"
)
_TELEGRAM_RE = re.compile(r"(?P<val>[0-9](?<![\w:][0-9])[0-9]{5,11}:AA[\w\-]{30,40})(?![\w\-])")
# 13-19 digits, optionally grouped by single spaces or dashes; not part of a longer number.
_CARD_RE = re.compile(
    r"[0-9](?<![\w.][0-9])(?<![0-9][ \-][0-9])[0-9]{3}(?:[ \-]?[0-9]){9,15}(?![ \-]?[0-9])(?![\w])")
_CARD_GROUPS = {(4, 4, 4, 4), (4, 4, 4, 4, 3), (4, 6, 5), (4, 6, 4), (4, 4, 4, 2), (4, 4, 4, 1),
                (4, 4, 4, 4, 1), (4, 4, 4, 4, 2), (4, 4, 5), (5, 5, 5, 1)}


# --------------------------------------------------------------------------
# Entropy


def _entropy(value: str) -> float:
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


def _mixed(value: str) -> bool:
    """Upper case, lower case and a digit all present."""
    return (value.lower() != value and value.upper() != value
            and _DIGIT_RE.search(value) is not None)


def _high_entropy(value: str, min_len: int = 24, min_entropy: float = 4.0) -> bool:
    """A long string mixing upper case, lower case and digits, close to random."""
    if len(value) < min_len or not _mixed(value) or _UUID_RE.fullmatch(value):
        return False
    return _entropy(value) >= min_entropy


def random_value(value: str) -> bool:
    """Looks random enough for a weakly named value (``SIGNING_SALT``, ``X-Auth``).

    Mixed case with digits (12+ characters), or one unbroken run of letters and
    digits (24+, e.g. a hex key); ids with dashes like ``ep-20261129-3f2a9c1b``
    and UUIDs are neither.
    """
    if len(value) < 12 or _UUID_RE.fullmatch(value) or _DIGIT_RE.search(value) is None:
        return False
    if _mixed(value):
        return _entropy(value) >= 3.2
    return len(value) >= 24 and _ALNUM_RE.fullmatch(value) is not None and _entropy(value) >= 3.5


_HEX_RUN_RE = re.compile(r"[0-9a-fA-F]{16,128}")


def credential_value(value: str) -> bool:
    """Looks random enough in a credential position (a weakly named value, a secret-named call's argument):
    :func:`random_value`, or a UUID, or 16+ hex digits mixing letters and digits (Heroku and many other
    vendors issue UUID or hex keys; the entropy alone layer leaves both to git SHAs and ids)."""
    if random_value(value) or _UUID_RE.fullmatch(value):
        return True
    return (_HEX_RUN_RE.fullmatch(value) is not None and _DIGIT_RE.search(value) is not None
            and not value.isdigit() and _entropy(value) >= 3.0)


def has_digit(value: str) -> bool:
    """At least one ASCII digit."""
    return _DIGIT_RE.search(value) is not None


def strip_dots(text: str, start: int, end: int) -> int:
    """End of a value without the dots that end a sentence after it."""
    while end > start + 1 and text[end - 1] == ".":
        end -= 1
    return end


# --------------------------------------------------------------------------
# Classification


def format_kind(run: str) -> str | None:
    """The kind of the table row ``run`` is exactly one token of, else None."""
    rows = _BY_HEAD.get(run[:2].lower())
    if rows:
        for prefix, f in rows:
            if run.startswith(prefix) and f.regex.fullmatch(run):
                return f.kind
    for f in _INFIX:
        if f.infix in run and (not f.first or run[0] in f.first) and f.regex.fullmatch(run):
            return f.kind
    return None


def _known_prefix(run: str) -> bool:
    """``run`` starts with a prefix of the table (its pattern may still reject it)."""
    return any(run.startswith(p) for p, _ in _BY_HEAD.get(run[:2].lower(), ()))


def generic_token(piece: str, after_sep: bool) -> bool:
    """Entropy alone: a random-looking token (layer 4).

    After ``=``/``:`` 24+ characters do; behind a short prefix (``xyz_live_``)
    20+; standing alone 32+ with two digits and no English-length lowercase run,
    so ``TestRedactIsIdempotentForEveryKind2`` (a camel-case name) stays.
    """
    if len(piece) < 20 or piece.startswith(_SSH_PUBLIC):
        return False
    if after_sep and _high_entropy(piece, 24, 4.0):
        return True
    m = _PREFIXED_RE.match(piece)
    if m and _high_entropy(m.group(2), 20, 3.7):
        return True
    return (len(piece) >= 32 and len(_DIGIT_RE.findall(piece)) >= 2
            and _LOWER_RUN_RE.search(piece) is None and _high_entropy(piece, 32, 4.3))


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _card_network(digits: str) -> bool:
    """A prefix and length that a card network issues (Visa, Mastercard, Amex, Discover, ...)."""
    n, d1, d2 = len(digits), digits[0], int(digits[:2])
    if d1 == "4":
        return n in (13, 16, 19)
    if 51 <= d2 <= 55 or 2221 <= int(digits[:4]) <= 2720:
        return n == 16
    if d2 in (34, 37):
        return n == 15
    if d1 == "6" or d2 in (30, 36, 38, 39) or 3528 <= int(digits[:4]) <= 3589:
        return 14 <= n <= 19
    return d1 == "5" and 12 <= n <= 19  # Maestro


# --------------------------------------------------------------------------
# Scanners. Each appends (start, end, priority, kind) to ``spans``.


def _scan_runs(text: str, spans: list) -> None:
    """Layers 1 and 4 over every maximal run of token characters (16+ long)."""
    for m in _RUN_RE.finditer(text):
        start, end = m.span()
        if start and text[start - 1] == "\\" and text[start] in "ntr":  # "\ntoken" in escaped JSON
            start += 1
        end = strip_dots(text, start, end)
        run = text[start:end]
        if len(run) < 16:
            continue
        kind = None
        if _known_prefix(run):  # a token may have '=' inside: ATATT3...=8C1F0E2A
            ext = _RUN_EQ_RE.match(text, start)
            if ext.end() > m.end():
                e2 = strip_dots(text, start, ext.end())
                kind = format_kind(text[start:e2])
                if kind is not None:
                    end = e2
            if kind is None:
                kind = format_kind(run)
        elif _INFIX_HINT.search(run):
            kind = format_kind(run)
        if kind is not None:
            spans.append((start, end, _FORMAT_PRIO[kind], kind))
            continue
        if run.lower() == run or _DIGIT_RE.search(run) is None:  # entropy alone wants A-Z, a-z, 0-9
            continue
        j = start - 1
        while j >= 0 and start - j <= 4 and text[j] in " \t\"'`\\":
            j -= 1
        # after '='/':', or a string literal passed to a call: Client("...")
        after_sep = j >= 0 and (text[j] in ":=" or (text[j] in "(," and text[start - 1] in "\"'`"))
        if "." not in run and not run.startswith("/") and generic_token(run, after_sep):
            spans.append((start, end, P_GEN, "high_entropy"))
            continue
        if "/" in run or "." in run:  # a path or a dotted name: its pieces, one by one
            pos = start
            for piece in _PIECE_SPLIT.split(run):
                if len(piece) >= 16:
                    kind = format_kind(piece)
                    if kind is not None:
                        spans.append((pos, pos + len(piece), _FORMAT_PRIO[kind], kind))
                    elif generic_token(piece, False):
                        spans.append((pos, pos + len(piece), P_GEN, "high_entropy"))
                pos += len(piece) + 1


def _scan_cards(text: str, spans: list) -> None:
    for m in _CARD_RE.finditer(text):
        raw = m.group(0)
        digits = raw.replace(" ", "").replace("-", "")
        if len(digits) != len(raw):
            groups = tuple(len(g) for g in re.split(r"[ \-]", raw))
            if groups not in _CARD_GROUPS or len({c for c in raw if not c.isdigit()}) != 1:
                continue
        if _card_network(digits) and _luhn(digits):
            spans.append((m.start(), m.end(), P_CONTEXT, "card_number"))


def scan_tokens(text: str, low: str, spans: list) -> None:
    """Every self-identifying secret in ``text`` (``low``: its lowercased copy, same offsets)."""
    # A run of 16+ token characters lies inside a whitespace-delimited word of 16+
    # (str.split runs in C; the run regex costs more on short chat text).
    if len(text) <= 256 or len(text) > 2048 or max(map(len, text.split()), default=0) >= 16:
        _scan_runs(text, spans)
    if "-----BEGIN" in text:
        spans.extend((m.start(), m.end(), P_PEM, "private_key") for m in _PEM_RE.finditer(text))
    if "://" in text and ("webhook" in low or "hooks.slack" in low):
        for m in _WEBHOOK_RE.finditer(text):
            name = m.lastgroup or "slack"
            spans.append((*m.span(name), P_CONTEXT, f"{name}_webhook"))
    if ":AA" in text:
        spans.extend((*m.span("val"), P_CONTEXT, "telegram_token") for m in _TELEGRAM_RE.finditer(text))
    ascii_ = text.encode("ascii", "ignore")
    if len(ascii_) - len(ascii_.translate(None, b"0123456789")) >= 13:  # a card has 13+ digits
        _scan_cards(text, spans)
