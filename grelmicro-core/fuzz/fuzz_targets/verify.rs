//! Fuzz target: arbitrary bytes as a bearer token.
//!
//! Two verifiers over a fixed key set (HS256 secret, kid `hs`; ES256 P-256
//! key, kid `es`) and fixed policies, at a fixed `now`. The same keys are
//! used by `security-tests/fuzz/` (atheris) and `security-tests/fuzz/seeds.py`
//! writes valid tokens for them, so a corpus entry means the same thing to
//! both fuzzers.
//!
//! Besides "no panic", every input checks these invariants:
//! - a refusal is always a token rejection (never a key/config error);
//! - verifying the same bytes twice gives the same answer (the header memo
//!   must not change a decision);
//! - an accepted token's claims are an object whose `exp` is a number and
//!   whose `aud`/`iss` match the policy;
//! - refusal messages come from a small set of templates (digits aside):
//!   a message that quoted token bytes would make the set grow with the
//!   inputs. (Comparing messages with the input directly does not work: the
//!   fuzzer learns the comparison operands and copies message text into its
//!   inputs.)

#![no_main]

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};

use grelmicro_core::json::Value;
use grelmicro_core::{Algorithm, ErrorKind, Key, KeySet, Policy, PolicyOptions, Verifier};
use libfuzzer_sys::fuzz_target;

/// 2023-11-14T22:13:20Z, as in the Python suite.
const NOW: f64 = 1_700_000_000.0;
const HS256_SECRET: &[u8] = b"grelmicro-fuzz-hs256-secret-0001";
const ES256_JWK: &str = r#"{"kty":"EC","crv":"P-256","kid":"es","x":"CHtwM9GQGOHZKIv3kaymX4Xk1_oJ4o2QqtbjYCsorAo","y":"6XzpE0gQ3DfO_qt8GPwZAS6U1JJRsrzAwx17nRnCg0M"}"#;

/// More distinct message templates than this means messages echo inputs.
const MAX_TEMPLATES: usize = 200;

struct Fixture {
    open: Verifier,
    strict: Verifier,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let keys = Arc::new(
            KeySet::new(vec![
                Arc::new(Key::secret(HS256_SECRET, Algorithm::HS256, Some("hs".into())).unwrap()),
                Arc::new(Key::jwk_json(ES256_JWK.as_bytes(), None, false).unwrap()),
            ])
            .unwrap(),
        );
        let open = Policy::new(PolicyOptions {
            audiences: vec!["fuzz-aud".into()],
            issuers: vec!["fuzz-iss".into()],
            leeway: 30.0,
            ..PolicyOptions::default()
        })
        .unwrap();
        let strict = Policy::new(PolicyOptions {
            algorithms: Some(vec!["ES256".into()]),
            required: vec!["exp".into(), "sub".into(), "tenant".into()],
            typ: Some("at+jwt".into()),
            max_age: Some(3600.0),
            max_depth: 4,
            max_token_size: 2048,
            ..PolicyOptions::default()
        })
        .unwrap();
        Fixture {
            open: Verifier::new(Arc::clone(&keys), Arc::new(open)).unwrap(),
            strict: Verifier::new(keys, Arc::new(strict)).unwrap(),
        }
    })
}

fn check(verifier: &Verifier, data: &[u8], expect_audience: bool) {
    let first = verifier.verify(data, NOW);
    let second = verifier.verify(data, NOW);
    match (&first, &second) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a.claims, b.claims, "same token, different claims");
            assert_eq!(
                a.valid_until.map(f64::to_bits),
                b.valid_until.map(f64::to_bits),
                "same token, different deadlines"
            );
        }
        (Err(a), Err(b)) => assert_eq!(a.kind(), b.kind(), "same token, different refusals"),
        _ => panic!("same token accepted once and refused once"),
    }
    match first {
        Ok(answer) => {
            // exp is required by both policies: every answer has an end.
            assert!(answer.valid_until.is_some(), "accepted without a deadline");
            let claims = answer.claims;
            assert!(
                matches!(claims, Value::Object(_)),
                "claims are not an object"
            );
            assert!(
                matches!(
                    claims.get("exp"),
                    Some(Value::Int(_) | Value::BigInt(_) | Value::Float(_))
                ),
                "accepted without a numeric exp"
            );
            if expect_audience {
                assert_eq!(claims.get("iss").and_then(Value::as_str), Some("fuzz-iss"));
                let aud = claims.get("aud").expect("accepted without aud");
                let ok = match aud {
                    Value::String(s) => s == "fuzz-aud",
                    Value::Array(items) => items.iter().any(|i| i.as_str() == Some("fuzz-aud")),
                    _ => false,
                };
                assert!(ok, "accepted with a foreign audience");
            }
        }
        Err(err) => {
            assert!(is_token_rejection(err.kind()), "not a rejection: {err}");
            remember(err.kind(), err.message());
        }
    }
}

/// Records the message with its digits removed; too many distinct ones fail.
/// A refusal of a token: not a build-time kind, not a `DPoP` kind.
fn is_token_rejection(kind: ErrorKind) -> bool {
    !matches!(
        kind,
        ErrorKind::InvalidKey
            | ErrorKind::WeakKey
            | ErrorKind::InvalidConfig
            | ErrorKind::DpopProof
            | ErrorKind::DpopReplay
            | ErrorKind::DpopBinding
    )
}

fn remember(kind: ErrorKind, message: &str) {
    static TEMPLATES: OnceLock<Mutex<HashSet<(ErrorKind, String)>>> = OnceLock::new();
    let template: String = message.chars().filter(|c| !c.is_ascii_digit()).collect();
    let mut seen = TEMPLATES
        .get_or_init(|| Mutex::new(HashSet::new()))
        .lock()
        .unwrap();
    seen.insert((kind, template));
    assert!(
        seen.len() <= MAX_TEMPLATES,
        "refusal messages vary with the token bytes: {seen:?}"
    );
}

fuzz_target!(|data: &[u8]| {
    let fixture = fixture();
    check(&fixture.open, data, true);
    check(&fixture.strict, data, false);
});
