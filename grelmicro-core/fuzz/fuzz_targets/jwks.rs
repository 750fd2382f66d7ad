//! Fuzz target: arbitrary bytes as a JWKS document and as a single JWK.
//!
//! Besides "no panic", every input checks these invariants:
//! - parsing is deterministic;
//! - a key set read without `allow_symmetric` never holds an `oct` key, and
//!   one read with a smaller key cap never holds more keys;
//! - a JWK built for a requested algorithm is bound to an algorithm that
//!   requested one accepts;
//! - errors are build-time kinds (`invalid-key`, `weak-key`), never token
//!   rejections.

#![no_main]

use grelmicro_core::key::KeyType;
use grelmicro_core::{Algorithm, ErrorKind, Key, KeySet};
use libfuzzer_sys::fuzz_target;

fn build_error(kind: ErrorKind) {
    assert!(
        matches!(kind, ErrorKind::InvalidKey | ErrorKind::WeakKey),
        "unexpected error kind {kind}"
    );
}

fn jwks(data: &[u8]) {
    for allow_symmetric in [false, true] {
        let first = KeySet::from_jwks(data, allow_symmetric, 100);
        let again = KeySet::from_jwks(data, allow_symmetric, 100);
        assert_eq!(
            first.is_ok(),
            again.is_ok(),
            "JWKS parsing is not deterministic"
        );
        match first {
            Ok(set) => {
                assert!(!set.is_empty());
                let again = again.unwrap();
                assert_eq!(set.len(), again.len());
                assert_eq!(set.skipped(), again.skipped());
                for key in set.keys() {
                    assert!(["oct", "RSA", "EC", "OKP"].contains(&key.kty().as_str()));
                    assert!(
                        allow_symmetric || key.kty() != KeyType::Oct,
                        "oct key without opt-in"
                    );
                    assert!(key.kid().is_none_or(|kid| !kid.is_empty()));
                }
                for skipped in set.skipped() {
                    assert!(!skipped.reason.is_empty());
                }
                if let Ok(small) = KeySet::from_jwks(data, allow_symmetric, 1) {
                    assert!(small.len() <= 1);
                }
            }
            Err(err) => build_error(err.kind()),
        }
    }
}

fn jwk(data: &[u8]) {
    for allow_symmetric in [false, true] {
        match Key::jwk_json(data, None, allow_symmetric) {
            Ok(key) => assert!(allow_symmetric || key.kty() != KeyType::Oct),
            Err(err) => build_error(err.kind()),
        }
    }
    // One requested algorithm per input, chosen by its length.
    let wanted = Algorithm::ALL[data.len() % Algorithm::ALL.len()];
    match Key::jwk_json(data, Some(wanted), true) {
        Ok(key) => assert!(
            key.algorithm().accepts(wanted),
            "{} key built for {}",
            key.algorithm().name(),
            wanted.name()
        ),
        Err(err) => build_error(err.kind()),
    }
}

fuzz_target!(|data: &[u8]| {
    jwks(data);
    jwk(data);
});
