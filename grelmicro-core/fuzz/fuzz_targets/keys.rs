//! Fuzz target: arbitrary bytes as every form a configured key comes in:
//! an HMAC secret, PEM text, a DER `SubjectPublicKeyInfo`, and one JWK.
//!
//! This is the target that reaches the hand-written DER reader (`der.rs`:
//! SPKI, X.509 certificate, PKCS#1) and the public-key-as-secret detector
//! (PEM, SSH, JWK text, DER, raw EC points, base64 and hex of those).
//!
//! Besides "no panic", every input checks these invariants:
//! - building is deterministic (same result, same fingerprint);
//! - a built key is bound to the requested algorithm (or, for a JWK, one
//!   the requested one accepts) and has the key type that algorithm needs;
//! - errors are build-time kinds (`invalid-key`, `weak-key`), never token
//!   rejections, and their messages never quote the input.

#![no_main]

use grelmicro_core::algorithm::Family;
use grelmicro_core::key::KeyType;
use grelmicro_core::{Algorithm, Error, ErrorKind, Key, Result};
use libfuzzer_sys::fuzz_target;

fn expected_type(alg: Algorithm) -> KeyType {
    match alg.family() {
        Family::Hmac => KeyType::Oct,
        Family::RsaPkcs1 | Family::RsaPss => KeyType::Rsa,
        Family::Ecdsa => KeyType::Ec,
        Family::Ed25519 => KeyType::Okp,
        Family::MlDsa => KeyType::Akp,
    }
}

fn refused(err: &Error, data: &[u8]) {
    assert!(
        matches!(err.kind(), ErrorKind::InvalidKey | ErrorKind::WeakKey),
        "unexpected error kind {}",
        err.kind()
    );
    // A message never quotes the input (checked from 64 bytes: shorter
    // inputs could be a piece of the fixed wording itself).
    if data.len() >= 64 {
        if let Ok(text) = std::str::from_utf8(data) {
            assert!(!err.message().contains(text), "message quotes the input");
        }
    }
}

/// Builds twice, checks determinism and the invariants of a built key.
fn check(data: &[u8], wanted: Algorithm, build: impl Fn() -> Result<Key>) {
    let first = build();
    let again = build();
    match (&first, &again) {
        (Ok(key), Ok(other)) => {
            assert_eq!(key.fingerprint(), other.fingerprint(), "not deterministic");
            assert!(
                key.algorithm().accepts(wanted),
                "bound to another algorithm"
            );
            assert_eq!(key.kty(), expected_type(wanted), "wrong key type");
            assert!(key.kid().is_none_or(|kid| !kid.is_empty()));
        }
        (Err(err), Err(other)) => {
            assert_eq!(err, other, "not deterministic");
            refused(err, data);
        }
        _ => panic!("building is not deterministic"),
    }
}

fuzz_target!(|data: &[u8]| {
    // One algorithm per input for the public forms, chosen by its first
    // byte, so every family is reached; the secret is tried under each HMAC.
    let wanted =
        Algorithm::ALL[usize::from(data.first().copied().unwrap_or(0)) % Algorithm::ALL.len()];
    for hmac in [Algorithm::HS256, Algorithm::HS384, Algorithm::HS512] {
        check(data, hmac, || Key::secret(data, hmac, None));
    }
    check(data, wanted, || Key::pem(data, wanted, None));
    check(data, wanted, || Key::spki(data, wanted, None));
    // The same bytes past the selector byte, so a valid DER or PEM seed
    // can sit behind it unchanged.
    if let Some((_, rest)) = data.split_first() {
        check(rest, wanted, || Key::pem(rest, wanted, None));
        check(rest, wanted, || Key::spki(rest, wanted, None));
    }
    match Key::jwk_json(data, Some(wanted), true) {
        Ok(key) => assert!(key.algorithm().accepts(wanted)),
        Err(err) => refused(&err, data),
    }
});
