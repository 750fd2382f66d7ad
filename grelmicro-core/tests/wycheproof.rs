//! Wycheproof test vectors run through the core.
//!
//! Provenance: the JSON files in `tests/wycheproof/` are unmodified copies
//! from C2SP/wycheproof (`testvectors_v1/`, commit and hashes in
//! `tests/wycheproof/README.md`, Apache-2.0). No code was copied.
//!
//! Two levels are covered:
//!
//! - primitive files (ECDSA P1363, Ed25519, RSA PKCS#1 v1.5, RSA-PSS, HMAC):
//!   every vector goes through the path a token takes, `Key::spki` or
//!   `Key::secret` at build time and `Key::verify` per signature;
//! - JOSE files (`json_web_signature_test.json`, `json_web_key_test.json`,
//!   in `tests/wycheproof_jose.rs`):
//!   compact JWS strings checked with `Key::jwk_json` / `KeySet::from_jwks`
//!   and `Verifier::authenticate` (structure, header, key choice, signature).
//!   Their payloads are not JWT claim sets (`"foo"`, raw bytes), so the claim
//!   step is not applied to them.
//!
//! Rules: `valid` must verify; `invalid` must be refused; `acceptable` is
//! treated as must-refuse (the safe choice for a verifier). A group that does
//! not apply to JWS is not silently dropped: its vectors are counted under a
//! named reason, and where the reason is "the key is refused when built" the
//! refusal itself is asserted. Every file's counts must add up to its
//! `numberOfTests` and match the numbers written in the tables below, so a
//! changed file or a changed behaviour fails the test.

use std::fmt::Write as _;

use grelmicro_core::{Algorithm, ErrorKind, Key};

mod common;
use common::{expect_verdict, hex, read, Counts, Label, MacFile, SignatureFile, SignatureGroup};

// ---------------------------------------------------------------------------
// Asymmetric signatures: ECDSA (P1363), Ed25519, RSA PKCS#1 v1.5, RSA-PSS
// ---------------------------------------------------------------------------

/// One primitive file, the JWS algorithm it stands for, and what must happen.
struct SignatureCase {
    file: &'static str,
    alg: Algorithm,
    expected: Counts,
}

const fn checked(checked: usize, acceptable_refused: usize, key_refused: usize) -> Counts {
    Counts {
        checked,
        acceptable_refused,
        key_refused,
        truncated_tag_refused: 0,
    }
}

/// ECDSA P1363 (raw r‖s), the JWS encoding of RFC 7518 §3.4. All keys build.
const ECDSA: [SignatureCase; 4] = [
    SignatureCase {
        file: "ecdsa_secp256r1_sha256_p1363_test.json",
        alg: Algorithm::ES256,
        expected: checked(262, 0, 0),
    },
    SignatureCase {
        file: "ecdsa_secp384r1_sha384_p1363_test.json",
        alg: Algorithm::ES384,
        expected: checked(280, 0, 0),
    },
    SignatureCase {
        file: "ecdsa_secp521r1_sha512_p1363_test.json",
        alg: Algorithm::ES512,
        expected: checked(318, 0, 0),
    },
    SignatureCase {
        file: "ecdsa_secp256k1_sha256_p1363_test.json",
        alg: Algorithm::ES256K,
        expected: checked(252, 0, 0),
    },
];

const ED25519: [SignatureCase; 1] = [SignatureCase {
    file: "ed25519_test.json",
    alg: Algorithm::EdDSA,
    expected: checked(151, 0, 0),
}];

/// RSA PKCS#1 v1.5. Each file has one `acceptable` vector (tcId 8,
/// "Missing NULL in the ASN encoding", flag `MissingNull`): refused here, as
/// aws-lc-rs compares the whole encoded `DigestInfo`. Groups with public
/// exponent 3 (one vector each, flag `EdgeCaseSignature`) are refused at build
/// time with `weak-key` (design §3: e below 65537 is refused).
const RSA_PKCS1: [SignatureCase; 9] = [
    SignatureCase {
        file: "rsa_signature_2048_sha256_test.json",
        alg: Algorithm::RS256,
        expected: checked(257, 1, 2),
    },
    SignatureCase {
        file: "rsa_signature_2048_sha384_test.json",
        alg: Algorithm::RS384,
        expected: checked(258, 1, 0),
    },
    SignatureCase {
        file: "rsa_signature_2048_sha512_test.json",
        alg: Algorithm::RS512,
        expected: checked(258, 1, 1),
    },
    SignatureCase {
        file: "rsa_signature_3072_sha256_test.json",
        alg: Algorithm::RS256,
        expected: checked(258, 1, 1),
    },
    SignatureCase {
        file: "rsa_signature_3072_sha384_test.json",
        alg: Algorithm::RS384,
        expected: checked(259, 1, 0),
    },
    SignatureCase {
        file: "rsa_signature_3072_sha512_test.json",
        alg: Algorithm::RS512,
        expected: checked(259, 1, 1),
    },
    SignatureCase {
        file: "rsa_signature_4096_sha256_test.json",
        alg: Algorithm::RS256,
        expected: checked(258, 1, 0),
    },
    SignatureCase {
        file: "rsa_signature_4096_sha384_test.json",
        alg: Algorithm::RS384,
        expected: checked(259, 1, 0),
    },
    SignatureCase {
        file: "rsa_signature_4096_sha512_test.json",
        alg: Algorithm::RS512,
        expected: checked(259, 1, 0),
    },
];

/// RSA-PSS with MGF1 on the same hash and salt length = hash length: exactly
/// the JWS parameter sets (RFC 7518 §3.5). No 2048/3072-bit PS512 or
/// 3072-bit PS384 file exists upstream (see the README).
const RSA_PSS: [SignatureCase; 6] = [
    SignatureCase {
        file: "rsa_pss_2048_sha256_mgf1_32_test.json",
        alg: Algorithm::PS256,
        expected: checked(108, 0, 0),
    },
    SignatureCase {
        file: "rsa_pss_2048_sha384_mgf1_48_test.json",
        alg: Algorithm::PS384,
        expected: checked(141, 0, 0),
    },
    SignatureCase {
        file: "rsa_pss_3072_sha256_mgf1_32_test.json",
        alg: Algorithm::PS256,
        expected: checked(108, 0, 0),
    },
    SignatureCase {
        file: "rsa_pss_4096_sha256_mgf1_32_test.json",
        alg: Algorithm::PS256,
        expected: checked(108, 0, 0),
    },
    SignatureCase {
        file: "rsa_pss_4096_sha384_mgf1_48_test.json",
        alg: Algorithm::PS384,
        expected: checked(141, 0, 0),
    },
    SignatureCase {
        file: "rsa_pss_4096_sha512_mgf1_64_test.json",
        alg: Algorithm::PS512,
        expected: checked(179, 0, 0),
    },
];

fn hash_len(alg: Algorithm) -> usize {
    match alg {
        Algorithm::PS384 | Algorithm::RS384 | Algorithm::HS384 => 48,
        Algorithm::PS512 | Algorithm::RS512 | Algorithm::HS512 => 64,
        _ => 32,
    }
}

/// The RSA public exponent of a group, as an integer (RSA files only).
fn rsa_exponent(group: &SignatureGroup) -> Option<u64> {
    let text = group.public_key.get("publicExponent")?.as_str()?;
    Some(
        hex(text)
            .iter()
            .fold(0u64, |acc, b| (acc << 8) | u64::from(*b)),
    )
}

fn run_signature_file(case: &SignatureCase) -> Counts {
    let file: SignatureFile = read(case.file);
    let mut counts = Counts::default();
    for group in &file.test_groups {
        let der = hex(&group.public_key_der);
        if let Some(s_len) = group.s_len {
            assert_eq!(
                s_len,
                hash_len(case.alg),
                "{}: salt length is not the JWS one",
                case.file
            );
        }
        let built = Key::spki(&der, case.alg, None);
        let key = match (rsa_exponent(group), built) {
            // Refused at build time: e < 65537 (design §3). Assert the
            // refusal; the group's signatures are never looked at.
            (Some(e), Err(err)) if e < 65_537 => {
                assert_eq!(
                    err.kind(),
                    ErrorKind::WeakKey,
                    "{}: e={e}: {err}",
                    case.file
                );
                counts.key_refused += group.tests.len();
                continue;
            }
            (Some(e), Ok(_)) if e < 65_537 => {
                panic!("{}: an RSA key with e={e} was accepted", case.file)
            }
            (_, Ok(key)) => key,
            (_, Err(err)) => panic!("{}: key refused: {err}", case.file),
        };
        // EdDSA keys also answer to the fully-specified name (RFC 9864).
        let alias = (case.alg == Algorithm::EdDSA)
            .then(|| Key::spki(&der, Algorithm::Ed25519, None).expect("Ed25519 key"));
        for vector in &group.tests {
            let msg = hex(&vector.msg);
            let sig = hex(&vector.sig);
            let outcome = key.verify(case.alg, &msg, &sig);
            expect_verdict(
                case.file,
                vector.tc_id,
                &vector.comment,
                vector.result,
                &outcome,
            );
            if let Some(alias) = &alias {
                let again = alias.verify(Algorithm::Ed25519, &msg, &sig);
                assert_eq!(
                    again.is_ok(),
                    outcome.is_ok(),
                    "{} tcId {}: Ed25519 alias",
                    case.file,
                    vector.tc_id
                );
            }
            counts.checked += 1;
            if vector.result == Label::Acceptable {
                counts.acceptable_refused += 1;
            }
        }
    }
    assert_eq!(
        counts.total(),
        file.number_of_tests,
        "{}: not every vector was accounted for",
        case.file
    );
    counts
}

fn run_signature_cases(cases: &[SignatureCase]) {
    let mut report = String::new();
    for case in cases {
        let counts = run_signature_file(case);
        writeln!(
            report,
            "{:<44} {:<6} checked {:>3} (acceptable refused {}), key refused at build {}",
            case.file,
            case.alg.name(),
            counts.checked,
            counts.acceptable_refused,
            counts.key_refused
        )
        .unwrap();
        assert!(counts.checked > 0, "{}: nothing was checked", case.file);
        assert_eq!(counts, case.expected, "{}: counts changed", case.file);
    }
    println!("{report}");
}

#[test]
fn ecdsa_p1363() {
    run_signature_cases(&ECDSA);
}

#[test]
fn ed25519() {
    run_signature_cases(&ED25519);
}

#[test]
fn rsa_pkcs1_v1_5() {
    run_signature_cases(&RSA_PKCS1);
}

#[test]
fn rsa_pss() {
    run_signature_cases(&RSA_PSS);
}

// ---------------------------------------------------------------------------
// HMAC
// ---------------------------------------------------------------------------

/// Per file: 84 vectors with a full-length tag and a key at least as long as
/// the hash output (keySize = hash bits, and 520 bits) are checked; 84
/// truncated-tag vectors (tagSize = half the hash) with a usable key are
/// asserted to be refused by the full-length verifier (JWS never truncates,
/// so a "valid" truncated tag must not pass as a JWS MAC); 6 vectors with a
/// key shorter than the hash output (both tag sizes) are refused when the key
/// is built (`weak-key`, RFC 7518 §3.2).
const HMAC: [(&str, Algorithm); 3] = [
    ("hmac_sha256_test.json", Algorithm::HS256),
    ("hmac_sha384_test.json", Algorithm::HS384),
    ("hmac_sha512_test.json", Algorithm::HS512),
];

const HMAC_EXPECTED: Counts = Counts {
    checked: 84,
    acceptable_refused: 0,
    key_refused: 6,
    truncated_tag_refused: 84,
};

fn run_mac_file(name: &str, alg: Algorithm) -> Counts {
    let file: MacFile = read(name);
    let bits = hash_len(alg) * 8;
    let mut counts = Counts::default();
    for group in &file.test_groups {
        for vector in &group.tests {
            let secret = hex(&vector.key);
            assert_eq!(
                secret.len() * 8,
                group.key_size,
                "{name} tcId {}",
                vector.tc_id
            );
            let built = Key::secret(&secret, alg, None);
            if group.key_size < bits {
                let err = built.expect_err("a short HMAC key was accepted");
                assert_eq!(
                    err.kind(),
                    ErrorKind::WeakKey,
                    "{name} tcId {}: {err}",
                    vector.tc_id
                );
                counts.key_refused += 1;
                continue;
            }
            let key = built.unwrap_or_else(|e| panic!("{name} tcId {}: {e}", vector.tc_id));
            let outcome = key.verify(alg, &hex(&vector.msg), &hex(&vector.tag));
            if group.tag_size < bits {
                let err = outcome.expect_err("a truncated tag verified as a full JWS MAC");
                assert_eq!(err.kind(), ErrorKind::Signature);
                counts.truncated_tag_refused += 1;
                continue;
            }
            expect_verdict(name, vector.tc_id, &vector.comment, vector.result, &outcome);
            counts.checked += 1;
        }
    }
    assert_eq!(
        counts.total(),
        file.number_of_tests,
        "{name}: not every vector was accounted for"
    );
    counts
}

#[test]
fn hmac() {
    for (name, alg) in HMAC {
        let counts = run_mac_file(name, alg);
        println!(
            "{name:<44} {:<6} checked {:>3}, truncated tag refused {}, key refused at build {}",
            alg.name(),
            counts.checked,
            counts.truncated_tag_refused,
            counts.key_refused
        );
        assert!(counts.checked > 0);
        assert_eq!(counts, HMAC_EXPECTED, "{name}: counts changed");
    }
}
