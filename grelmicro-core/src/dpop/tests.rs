//! Tests of DPoP proofs, thumbprints and `htu` normalisation.
#![allow(clippy::float_cmp)]

use super::*;
use crate::error::ErrorKind;
use crate::json::Value;
use crate::token;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{
    EcdsaKeyPair, Ed25519KeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING,
};

const TOKEN: &[u8] = b"access.token.bytes";
const URI: &str = "https://api.example.com/items";
const NOW: f64 = 1_700_000_000.0;

struct Signer {
    pair: EcdsaKeyPair,
    jwk: String,
}

fn p256() -> Signer {
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).unwrap();
    let point = pair.public_key().as_ref();
    let jwk = format!(
        r#"{{"kty":"EC","crv":"P-256","x":"{}","y":"{}"}}"#,
        token::encode(&point[1..33]),
        token::encode(&point[33..65])
    );
    Signer { pair, jwk }
}

impl Signer {
    fn jkt(&self) -> String {
        thumbprint(&Value::parse(self.jwk.as_bytes(), 8).unwrap()).unwrap()
    }

    fn sign(&self, header: &str, payload: &str) -> Vec<u8> {
        let input = format!(
            "{}.{}",
            token::encode(header.as_bytes()),
            token::encode(payload.as_bytes())
        );
        let sig = self
            .pair
            .sign(&SystemRandom::new(), input.as_bytes())
            .unwrap();
        format!("{input}.{}", token::encode(sig.as_ref())).into_bytes()
    }

    fn header(&self) -> String {
        format!(r#"{{"typ":"dpop+jwt","alg":"ES256","jwk":{}}}"#, self.jwk)
    }

    fn proof(&self, claims: &str) -> Vec<u8> {
        self.sign(&self.header(), claims)
    }
}

fn ath() -> String {
    token::encode(&crate::digest::sha256(TOKEN))
}

fn claims(extra: &str) -> String {
    format!(
        r#"{{"jti":"j-1","htm":"GET","htu":"{URI}","iat":{NOW},"ath":"{}"{extra}}}"#,
        ath()
    )
}

fn verifier() -> ProofVerifier {
    ProofVerifier::new(ProofOptions::default()).unwrap()
}

/// `verifier` on a proof for a GET of `URI` with `TOKEN`, bound to `jkt`, at `now`.
fn verify_at(
    verifier: &ProofVerifier,
    proof: &[u8],
    jkt: &str,
    now: f64,
) -> std::result::Result<Accepted, Refusal> {
    verifier.verify(proof, "GET", URI, TOKEN, jkt, now)
}

fn check(signer: &Signer, proof: &[u8]) -> std::result::Result<Accepted, Refusal> {
    verify_at(&verifier(), proof, &signer.jkt(), NOW)
}

#[test]
fn a_good_proof_is_accepted() {
    let signer = p256();
    let accepted = check(&signer, &signer.proof(&claims(r#","nonce":"n1""#))).unwrap();
    assert_eq!(accepted.iat, NOW);
    assert_eq!(accepted.nonce.as_deref(), Some("n1"));
    assert_eq!(accepted.algorithm, Algorithm::ES256);
    // Another jti, another replay key; the same jti, the same key.
    let again = check(&signer, &signer.proof(&claims(""))).unwrap();
    assert_eq!(again.replay_key, accepted.replay_key);
    let other = signer.proof(&claims("").replace("j-1", "j-2"));
    assert_ne!(
        check(&signer, &other).unwrap().replay_key,
        accepted.replay_key
    );
}

#[test]
fn each_claim_rule_is_enforced() {
    let signer = p256();
    let cases: [(String, Check); 12] = [
        (claims("").replace(r#""jti":"j-1","#, ""), Check::Jti),
        (claims("").replace(r#""j-1""#, r#""""#), Check::Jti),
        (claims("").replace(r#""j-1""#, "7"), Check::Jti),
        (claims("").replace(r#""GET""#, r#""POST""#), Check::Method),
        (claims("").replace(r#""GET""#, r#""get""#), Check::Method),
        (claims("").replace("/items", "/other"), Check::Uri),
        (
            claims("").replace(&format!("{NOW}"), &format!("{}", NOW + 6.0)),
            Check::IssuedAt,
        ),
        (
            claims("").replace(&format!("{NOW}"), &format!("{}", NOW - 66.0)),
            Check::IssuedAt,
        ),
        (
            claims("").replace(&format!("{NOW}"), &format!("\"{NOW}\"")),
            Check::IssuedAt,
        ),
        (claims("").replace(&ath(), "AAAA"), Check::AccessTokenHash),
        (claims(r#","nonce":1"#), Check::Nonce),
        (r#"["not an object"]"#.to_owned(), Check::Structure),
    ];
    for (payload, expected) in cases {
        let refusal = check(&signer, &signer.proof(&payload)).unwrap_err();
        assert_eq!(refusal.check, expected, "{payload}");
        assert_eq!(refusal.kind().as_str(), "dpop-proof");
    }
    // The window edges hold, leeway both ways.
    for iat in [NOW + 5.0, NOW - 65.0] {
        let payload = claims("").replace(&format!("{NOW}"), &format!("{iat}"));
        assert!(check(&signer, &signer.proof(&payload)).is_ok(), "{iat}");
    }
}

#[test]
fn header_rules_are_enforced() {
    let signer = p256();
    let body = claims("");
    let jwk = &signer.jwk;
    let cases = [
        (format!(r#"{{"typ":"JWT","alg":"ES256","jwk":{jwk}}}"#), Check::Type),
        (format!(r#"{{"alg":"ES256","jwk":{jwk}}}"#), Check::Type),
        (format!(r#"{{"typ":"dpop+jwt","alg":"HS256","jwk":{jwk}}}"#), Check::Algorithm),
        (format!(r#"{{"typ":"dpop+jwt","alg":"none","jwk":{jwk}}}"#), Check::Algorithm),
        (format!(r#"{{"typ":"dpop+jwt","alg":"ES384","jwk":{jwk}}}"#), Check::Key),
        (r#"{"typ":"dpop+jwt","alg":"ES256"}"#.to_owned(), Check::Key),
        (
            format!(r#"{{"typ":"dpop+jwt","alg":"ES256","jwk":{}}}"#, jwk.replace('}', r#","d":"AAAA"}"#)),
            Check::Key,
        ),
        (
            r#"{"typ":"dpop+jwt","alg":"ES256","jwk":{"kty":"oct","k":"c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"}}"#.to_owned(),
            Check::Key,
        ),
        (
            format!(r#"{{"typ":"dpop+jwt","alg":"ES256","crit":["x"],"jwk":{jwk}}}"#),
            Check::Structure,
        ),
        (
            format!(r#"{{"typ":"dpop+jwt","typ":"dpop+jwt","alg":"ES256","jwk":{jwk}}}"#),
            Check::Structure,
        ),
    ];
    for (header, expected) in cases {
        let refusal = check(&signer, &signer.sign(&header, &body)).unwrap_err();
        assert_eq!(refusal.check, expected, "{header}");
    }
    // `application/dpop+jwt` and case differences name the same type.
    let header = format!(r#"{{"typ":"application/DPoP+JWT","alg":"ES256","jwk":{jwk}}}"#);
    assert!(check(&signer, &signer.sign(&header, &body)).is_ok());
}

#[test]
fn signature_and_binding() {
    let signer = p256();
    let other = p256();
    // Signed by another key than the header's.
    let forged = other.sign(&signer.header(), &claims(""));
    assert_eq!(check(&signer, &forged).unwrap_err().check, Check::Signature);
    // A good proof by a key the token is not bound to.
    let refusal = check(&signer, &other.proof(&claims(""))).unwrap_err();
    assert_eq!(refusal.check, Check::Binding);
    assert_eq!(refusal.kind().as_str(), "dpop-binding");
}

/// `proof` with its signature replaced by 64 bytes that verify under no key.
fn garbage_signature(proof: &[u8]) -> Vec<u8> {
    let dot = proof.iter().rposition(|&b| b == b'.').unwrap();
    let mut forged = proof[..=dot].to_vec();
    forged.extend_from_slice(token::encode(&[7u8; 64]).as_bytes());
    forged
}

#[test]
fn the_binding_is_checked_before_the_signature() {
    let signer = p256();
    let other = p256();
    // Another key's header and a signature no key makes: the binding
    // refuses it, so no signature is ever checked.
    let refusal = check(&signer, &garbage_signature(&other.proof(&claims("")))).unwrap_err();
    assert_eq!(refusal.check, Check::Binding);
    // The same signature under the bound key's header: a signature refusal.
    let refusal = check(&signer, &garbage_signature(&signer.proof(&claims("")))).unwrap_err();
    assert_eq!(refusal.check, Check::Signature);
}

#[test]
fn size_and_time_limits() {
    let signer = p256();
    let small = ProofVerifier::new(ProofOptions {
        max_size: 64,
        ..ProofOptions::default()
    })
    .unwrap();
    let refusal = verify_at(&small, &signer.proof(&claims("")), &signer.jkt(), NOW).unwrap_err();
    assert_eq!(refusal.error.kind(), ErrorKind::TooLarge);
    let proof = signer.proof(&claims(""));
    let refusal = verify_at(&verifier(), &proof, &signer.jkt(), f64::NAN).unwrap_err();
    assert_eq!(refusal.check, Check::IssuedAt);
}

#[test]
fn ed25519_proofs_and_small_order_keys() {
    let rng = SystemRandom::new();
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
    let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
    let jwk = format!(
        r#"{{"kty":"OKP","crv":"Ed25519","x":"{}"}}"#,
        token::encode(pair.public_key().as_ref())
    );
    let header = format!(r#"{{"typ":"dpop+jwt","alg":"EdDSA","jwk":{jwk}}}"#);
    let input = format!(
        "{}.{}",
        token::encode(header.as_bytes()),
        token::encode(claims("").as_bytes())
    );
    let proof = format!(
        "{input}.{}",
        token::encode(pair.sign(input.as_bytes()).as_ref())
    );
    let jkt = thumbprint(&Value::parse(jwk.as_bytes(), 8).unwrap()).unwrap();
    assert!(verify_at(&verifier(), proof.as_bytes(), &jkt, NOW).is_ok());
    // The identity point: any signature would do, so the key is refused.
    let mut identity = [0u8; 32];
    identity[0] = 1;
    let bad = format!(
        r#"{{"typ":"dpop+jwt","alg":"EdDSA","jwk":{{"kty":"OKP","crv":"Ed25519","x":"{}"}}}}"#,
        token::encode(&identity)
    );
    let input = format!(
        "{}.{}",
        token::encode(bad.as_bytes()),
        token::encode(claims("").as_bytes())
    );
    let proof = format!("{input}.{}", token::encode(&[0u8; 64]));
    let refusal = verify_at(&verifier(), proof.as_bytes(), &jkt, NOW).unwrap_err();
    assert_eq!(refusal.check, Check::Key);
}

#[test]
fn hmac_cannot_be_allowed() {
    for algorithms in [vec!["HS256".to_owned()], vec![], vec!["none".to_owned()]] {
        assert!(ProofVerifier::new(ProofOptions {
            algorithms: Some(algorithms),
            ..ProofOptions::default()
        })
        .is_err());
    }
    let only_es = ProofVerifier::new(ProofOptions {
        algorithms: Some(vec!["ES256".to_owned()]),
        ..ProofOptions::default()
    })
    .unwrap();
    assert!(only_es.allows(Algorithm::ES256));
    assert!(!only_es.allows(Algorithm::RS256));
    assert!(!verifier().allows(Algorithm::HS256));
    assert!(verifier().allows(Algorithm::Ed25519));
}

#[test]
fn rfc7638_example_thumbprint() {
    // RFC 7638 §3.1.
    let jwk = br#"{"kty":"RSA","n":"0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw","e":"AQAB","alg":"RS256","kid":"2011-04-29"}"#;
    let value = Value::parse(jwk, 8).unwrap();
    assert_eq!(
        thumbprint(&value).unwrap(),
        "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"
    );
    // Member order and extra members do not change it.
    let reordered = Value::parse(
        br#"{"e":"AQAB","kty":"RSA","use":"sig","n":"0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"}"#,
        8,
    )
    .unwrap();
    assert_eq!(thumbprint(&reordered).unwrap(), thumbprint(&value).unwrap());
    let escaped = Value::parse(br#"{"kty":"RSA","n":"a\"b","e":"AQAB"}"#, 8).unwrap();
    assert!(thumbprint(&escaped).is_err());
}

#[test]
fn ec_and_okp_thumbprints_match_the_rfc_examples() {
    let cases = [
        // RFC 9449 §6.1: the `jkt` of the key its example proofs carry.
        (
            r#"{"kty":"EC","x":"l8tFrhx-34tV3hRICRDY9zCkDlpBhF42UQUfWVAWBFs","y":"9VE4jf_Ok_o64zbTTlcuNJajHmt6v9TDVrU0CdvGRDA","crv":"P-256"}"#,
            "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I",
        ),
        // RFC 8037 Appendix A.3.
        (
            r#"{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}"#,
            "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k",
        ),
    ];
    for (jwk, expected) in cases {
        let value = Value::parse(jwk.as_bytes(), 8).unwrap();
        assert_eq!(thumbprint(&value).unwrap(), expected, "{jwk}");
    }
}

#[test]
fn htu_normalisation() {
    let same = [
        (
            "https://server.example.com/path",
            "https://server.example.com/path",
        ),
        (
            "HTTPS://Server.Example.COM/path",
            "https://server.example.com/path",
        ),
        (
            "https://server.example.com:443/path",
            "https://server.example.com/path",
        ),
        (
            "http://server.example.com:80/path",
            "http://server.example.com/path",
        ),
        ("https://server.example.com", "https://server.example.com/"),
        (
            "https://server.example.com:/path",
            "https://server.example.com/path",
        ),
        (
            "https://server.example.com/path?query=1#frag",
            "https://server.example.com/path",
        ),
        (
            "https://server.example.com/a/./b/../c",
            "https://server.example.com/a/c",
        ),
        (
            "https://server.example.com/%7euser/%2fx",
            "https://server.example.com/~user/%2Fx",
        ),
        ("https://[::1]:8443/x", "https://[::1]:8443/x"),
        (
            "https://server.example.com:0443/",
            "https://server.example.com/",
        ),
    ];
    for (input, expected) in same {
        assert_eq!(normalize_htu(input).as_deref(), Some(expected), "{input}");
    }
    let different = [
        (
            "https://server.example.com/Path",
            "https://server.example.com/path",
        ),
        (
            "http://server.example.com/path",
            "https://server.example.com/path",
        ),
        (
            "https://server.example.com:8443/path",
            "https://server.example.com/path",
        ),
        (
            "https://server.example.com/path/",
            "https://server.example.com/path",
        ),
    ];
    for (a, b) in different {
        assert_ne!(normalize_htu(a), normalize_htu(b), "{a} vs {b}");
    }
    for bad in [
        "",
        "/path",
        "ftp://server.example.com/",
        "https://user@server.example.com/",
        "https:///path",
        "https://server.example.com:99999/",
        "https://server.example.com:x/",
        "https://server.example.com/a b",
        "https://server.example.com/%zz",
        "https://server.example.com/%4",
        "https://[::1/",
        "https://server.example.com/\u{e9}",
    ] {
        assert_eq!(normalize_htu(bad), None, "{bad}");
    }
}

#[test]
fn refusals_cross_with_their_dpop_kind_and_check() {
    let inner =
        Error::new(ErrorKind::TooLarge, "proof is too large").detail("limit", Detail::Number(1.0));
    let proof: Error = Refusal::from(Check::Structure, inner).into();
    assert_eq!(proof.kind(), ErrorKind::DpopProof);
    assert_eq!(proof.kind().as_str(), "dpop-proof");
    assert_eq!(proof.message(), "proof is too large");
    assert_eq!(
        proof.context(),
        &[("check", Detail::Text("structure".to_owned()))]
    );
    let binding: Error =
        Refusal::new(Check::Binding, ErrorKind::Signature, "not the bound key").into();
    assert_eq!(binding.kind().as_str(), "dpop-binding");
    assert_eq!(
        binding.context(),
        &[("check", Detail::Text("jkt".to_owned()))]
    );
}

#[test]
fn rsa_members_with_leading_zero_octets_have_no_thumbprint() {
    // RFC 7518 §6.3.1.1: n and e are the shortest octets; a leading zero
    // would give one key a second RFC 7638 thumbprint (issue 33, N20).
    const N: &str = "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw";
    let padded_n = token::encode(&[&[0u8][..], &token::decode(N.as_bytes()).unwrap()].concat());
    let jwk = |n: &str, e: &str| {
        Value::parse(
            format!(r#"{{"kty":"RSA","n":"{n}","e":"{e}"}}"#).as_bytes(),
            8,
        )
        .unwrap()
    };
    assert!(thumbprint(&jwk(N, "AQAB")).is_ok());
    for (n, e) in [
        (padded_n.as_str(), "AQAB"),
        (N, "AAEAAQ"),
        (N, "AA"),
        ("AA", "AQAB"),
    ] {
        let err = thumbprint(&jwk(n, e)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidKey);
        assert!(err.message().contains("leading zero"), "{}", err.message());
    }
}
