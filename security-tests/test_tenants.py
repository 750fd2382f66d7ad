"""Attack class: a token of one tenant accepted for another (multi-tenant issuer templates).

Issue 34. An issuer template (Entra ID's
``https://login.microsoftonline.com/{tenantid}/v2.0``) trusts one key set
for every tenant, so everything rests on the match of the token's ``iss``
against the template and its tenant claim (``tid``):

- placeholder injection (and a property over arbitrary text): a tenant
  segment holding ``/``, ``..``, ``%2F``,
  percent-encoded letters, characters from another script that look like a
  listed GUID, control characters or nothing must match no tenant, even
  with ``tenants="any"``;
- a token whose ``iss`` names one tenant and whose ``tid`` names another
  (the token of another tenant's app registration), or whose ``tid`` is not
  a string, is refused (``tenant``);
- a tenant outside the allow-list is refused (``tenant``), and a template
  without an allow-list, or two issuers that can match one ``iss``, are
  refused when the verifier is built;
- the refusal names the token's values escaped and capped, never raw.

References: Microsoft identity platform, "Convert single-tenant app to
multi-tenant" (validating ``iss`` with ``tid``); RFC 8725 §3.8 (issuer and
key binding); CWE-20 (improper input validation), CWE-178 (case), CWE-176
(Unicode encoding), CWE-1188 (insecure default).
"""

from __future__ import annotations

import re
from typing import Any

import forge
import pytest
import support
from hypothesis import given
from hypothesis import strategies as st

from grelmicro.jwt import ConfigurationError, Issuer, JWTVerifier

TEMPLATE = "https://login.microsoftonline.com/{tenantid}/v2.0"
T1 = "0f6b3c4e-2a1d-4c8b-9e7f-1a2b3c4d5e6f"
T2 = "7d1e9a20-5b3c-4f6d-8e9a-0b1c2d3e4f50"
AUD = "api://orders"


def iss(tenant: str) -> str:
    return TEMPLATE.replace("{tenantid}", tenant)


@pytest.fixture(scope="module")
def signer() -> forge.Signer:
    return forge.private_key("RS256", kid="entra-1", seed=60)


def verifier(signer: forge.Signer, tenants: Any) -> JWTVerifier:
    jwk = signer.public_jwk()
    del jwk["alg"]  # Entra's keys carry no alg
    return JWTVerifier(
        jwks={"keys": [jwk]}, issuer=TEMPLATE, tenants=tenants, audience=AUD, cache_size=0
    )


def token(signer: forge.Signer, issuer: str, tid: object) -> str:
    return signer.mint({"iss": issuer, "tid": tid, "aud": AUD, "exp": support.NOW + 600})


INJECTED = {
    "slash": f"{T1}/{T2}",
    "dot-dot": "..",
    "dot-dot-segments": f"{T1}/../{T2}",
    "percent-2F": f"{T1}%2F{T2}",
    "percent-2f": f"{T1}%2f..",
    "percent-encoded-letter": "%30" + T1[1:],
    "cyrillic-a-look-alike": T1.replace("a", "\u0430"),
    "fullwidth-zero": "\uff10" + T1[1:],
    "dotless-i": T1 + "\u0131",
    "empty": "",
    "leading-space": " " + T1,
    "tab": T1 + "\t",
    "crlf": T1 + "\r\n",
    "nul": T1 + "\x00",
    "backslash": T1 + "\\" + T2,
    "query": T1 + "?x=",
    "fragment": T1 + "#",
    "at-sign": "evil@" + T1,
    "dot": "contoso.onmicrosoft.com",
    "placeholder-itself": "{tenantid}",
    "too-long": "a" * 65,
}


@pytest.mark.parametrize("segment", list(INJECTED.values()), ids=list(INJECTED))
@pytest.mark.parametrize("tenants", [[T1, T2], "any"], ids=["listed", "any"])
def test_placeholder_injection_matches_no_tenant(
    signer: forge.Signer, segment: str, tenants: Any
) -> None:
    target = verifier(signer, tenants)
    assert support.accept(target, token(signer, iss(T1), T1))  # the positive control
    error = support.reject(target, token(signer, iss(segment), segment), "issuer")
    text = str(error)
    assert all(ch.isascii() and (ch.isprintable() or ch == " ") for ch in text), text


@pytest.mark.parametrize(
    "tid",
    [T2, T1.upper(), 1, 1.5, True, None, [T1], {"tid": T1}, ""],
    ids=["other-tenant", "upper-case", "int", "float", "bool", "null", "array", "object", "empty"],
)
def test_a_tenant_claim_that_is_not_the_iss_tenant_is_refused(
    signer: forge.Signer, tid: object
) -> None:
    support.reject(verifier(signer, "any"), token(signer, iss(T1), tid), "tenant")


def test_a_token_without_tid_is_refused(signer: forge.Signer) -> None:
    bare = signer.mint({"iss": iss(T1), "aud": AUD, "exp": support.NOW + 600})
    support.reject(verifier(signer, "any"), bare, "tenant")


def test_a_tenant_outside_the_list_is_refused_and_not_echoed_raw(signer: forge.Signer) -> None:
    target = verifier(signer, [T1])
    support.reject(target, token(signer, iss(T2), T2), "tenant")
    long_tenant = "b" * 64
    error = support.reject(target, token(signer, iss(long_tenant), long_tenant), "tenant")
    assert long_tenant in str(error)  # 64 characters: shown whole
    hostile = "\u202e" + T1  # right-to-left override: no segment match, escaped in the refusal
    error = support.reject(target, token(signer, iss(hostile), hostile), "issuer")
    assert "\u202e" not in str(error)


#: What a tenant segment may be, written here independently of the product.
SEGMENT = re.compile(r"[A-Za-z0-9_-]{1,64}", re.ASCII)


@pytest.fixture(scope="module")
def any_tenant(signer: forge.Signer) -> JWTVerifier:
    return verifier(signer, "any")


@given(
    segment=st.text(max_size=70)
    | st.from_regex(r"[A-Za-z0-9_.%/-]{0,66}", fullmatch=True)
    | st.sampled_from(list(INJECTED.values()))
)
def test_only_one_safe_segment_is_ever_a_tenant(
    signer: forge.Signer, any_tenant: JWTVerifier, segment: str
) -> None:
    result = support.outcome(any_tenant, token(signer, iss(segment), segment))
    if SEGMENT.fullmatch(segment):
        assert result[0] == "accepted"
        assert result[1]["tid"] == segment
    else:
        assert result == ("rejected", "issuer")


def test_duplicate_iss_or_tid_members_are_refused(signer: forge.Signer) -> None:
    # JSON with two "tid" members: a parser taking the last would see T1.
    body = (
        f'{{"iss":"{iss(T1)}","tid":"{T2}","tid":"{T1}","aud":"{AUD}","exp":{support.NOW + 600}}}'
    )
    forged = signer.mint(body.encode())
    assert support.outcome(verifier(signer, "any"), forged)[0] == "rejected"


def test_a_template_without_an_allow_list_is_refused_when_built() -> None:
    with pytest.raises(ConfigurationError):
        JWTVerifier(jwks={"keys": []}, issuer=TEMPLATE)
    with pytest.raises(ConfigurationError):
        Issuer(TEMPLATE, jwks_url="https://login.microsoftonline.com/common/keys")


@pytest.mark.parametrize(
    "other",
    [
        "https://login.microsoftonline.com/organizations/v2.0",
        "https://login.microsoftonline.com/{tenantid}/v2.0",
    ],
)
def test_issuers_that_can_match_one_iss_are_refused_when_built(other: str) -> None:
    first = Issuer(TEMPLATE, jwks_url="https://a.example/keys", tenants="any")
    second = (
        Issuer(other, jwks_url="https://b.example/keys", tenants="any")
        if "{tenantid}" in other
        else Issuer(other, jwks_url="https://b.example/keys")
    )
    with pytest.raises(ConfigurationError):
        JWTVerifier(issuers=[first, second])
