//! Tests of ML-DSA (RFC 9964) keys: `AKP` JWKs, SPKI, size rules, the
//! opt-in allow-list and the `AKP` thumbprint. Tokens are signed here with
//! aws-lc's own ML-DSA; tests/jwt/test_mldsa.py checks tokens from an
//! independent implementation.

use std::sync::Arc;

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::signature::{
    KeyPair, PqdsaKeyPair, PqdsaSigningAlgorithm, ML_DSA_44_SIGNING, ML_DSA_65_SIGNING,
    ML_DSA_87_SIGNING,
};

use super::*;
use crate::error::Detail;
use crate::json::Value;
use crate::keyset::KeySet;
use crate::policy::{Policy, PolicyOptions};
use crate::token;
use crate::verifier::Verifier;

const SETS: [(Algorithm, &PqdsaSigningAlgorithm, usize, usize); 3] = [
    (Algorithm::MlDsa44, &ML_DSA_44_SIGNING, 1312, 2420),
    (Algorithm::MlDsa65, &ML_DSA_65_SIGNING, 1952, 3309),
    (Algorithm::MlDsa87, &ML_DSA_87_SIGNING, 2592, 4627),
];

struct Signer {
    algorithm: Algorithm,
    pair: PqdsaKeyPair,
}

impl Signer {
    fn new(algorithm: Algorithm) -> Signer {
        let signing = SETS.iter().find(|s| s.0 == algorithm).unwrap().1;
        Signer {
            algorithm,
            pair: PqdsaKeyPair::generate(signing).unwrap(),
        }
    }

    fn public(&self) -> Vec<u8> {
        self.pair.public_key().as_ref().to_vec()
    }

    fn jwk(&self) -> String {
        format!(
            r#"{{"kty":"AKP","alg":"{}","pub":"{}"}}"#,
            self.algorithm.name(),
            token::encode(&self.public())
        )
    }

    fn key(&self) -> Key {
        Key::jwk_json(self.jwk().as_bytes(), None, false).unwrap()
    }

    fn sign(&self, message: &[u8]) -> Vec<u8> {
        let mut signature = vec![0; self.algorithm.fixed_signature_len().unwrap()];
        let written = self.pair.sign(message, &mut signature).unwrap();
        signature.truncate(written);
        signature
    }

    fn token(&self, header: &str, payload: &str) -> String {
        let input = format!(
            "{}.{}",
            token::encode(header.as_bytes()),
            token::encode(payload.as_bytes())
        );
        format!("{input}.{}", token::encode(&self.sign(input.as_bytes())))
    }
}

fn kind<T: std::fmt::Debug>(result: Result<T>) -> ErrorKind {
    result.unwrap_err().kind()
}

#[test]
fn sizes_follow_fips_204() {
    for (algorithm, signing, public, signature) in SETS {
        assert_eq!(algorithm.mldsa_public_key_len(), Some(public));
        assert_eq!(algorithm.fixed_signature_len(), Some(signature));
        assert_eq!(signing.public_key_len(), public);
        assert_eq!(signing.signature_len(), signature);
        assert_eq!(
            algorithm.fixed_signature_text_len(),
            Some(token::encode(&vec![0; signature]).len())
        );
        assert_eq!(algorithm.family(), Family::MlDsa);
        assert!(algorithm.opt_in());
        assert_eq!(
            Algorithm::from_name(algorithm.name().as_bytes()),
            Some(algorithm)
        );
    }
    assert!(Algorithm::ALL
        .into_iter()
        .filter(|a| a.family() != Family::MlDsa)
        .all(|a| !a.opt_in() && a.mldsa_public_key_len().is_none()));
}

#[test]
fn akp_jwks_verify_their_own_parameter_set_only() {
    for (algorithm, ..) in SETS {
        let signer = Signer::new(algorithm);
        let key = signer.key();
        assert_eq!(key.algorithm(), algorithm);
        assert_eq!(key.kty(), KeyType::Akp);
        let signature = signer.sign(b"message");
        assert!(key.verify(algorithm, b"message", &signature).is_ok());
        assert_eq!(
            kind(key.verify(algorithm, b"massage", &signature)),
            ErrorKind::Signature
        );
        // Truncated, extended, flipped.
        let short = &signature[..signature.len() - 1];
        assert_eq!(
            kind(key.verify(algorithm, b"message", short)),
            ErrorKind::Signature
        );
        let mut long = signature.clone();
        long.push(0);
        assert_eq!(
            kind(key.verify(algorithm, b"message", &long)),
            ErrorKind::Signature
        );
        let mut flipped = signature.clone();
        flipped[10] ^= 1;
        assert_eq!(
            kind(key.verify(algorithm, b"message", &flipped)),
            ErrorKind::Signature
        );
        // The requested algorithm must be the JWK's own.
        for (other, ..) in SETS {
            let requested = Key::jwk_json(signer.jwk().as_bytes(), Some(other), false);
            assert_eq!(requested.is_ok(), other == algorithm, "{}", other.name());
        }
        for other in [Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA] {
            assert_eq!(
                kind(Key::jwk_json(signer.jwk().as_bytes(), Some(other), false)),
                ErrorKind::InvalidKey
            );
        }
    }
}

#[test]
fn akp_jwk_rules() {
    let signer = Signer::new(Algorithm::MlDsa44);
    let public = token::encode(&signer.public());
    let refused = |jwk: String| kind(Key::jwk_json(jwk.as_bytes(), None, false));
    // alg is required (RFC 9964) and must be an ML-DSA one.
    assert_eq!(
        refused(format!(r#"{{"kty":"AKP","pub":"{public}"}}"#)),
        ErrorKind::InvalidKey
    );
    assert_eq!(
        refused(format!(r#"{{"kty":"AKP","alg":"ES256","pub":"{public}"}}"#)),
        ErrorKind::InvalidKey
    );
    assert_eq!(
        refused(format!(
            r#"{{"kty":"AKP","alg":"ML-DSA-99","pub":"{public}"}}"#
        )),
        ErrorKind::InvalidKey
    );
    // The key of one parameter set under another's name: wrong length.
    assert_eq!(
        refused(format!(
            r#"{{"kty":"AKP","alg":"ML-DSA-65","pub":"{public}"}}"#
        )),
        ErrorKind::InvalidKey
    );
    // A private key is refused, whatever else the JWK holds.
    let private = token::encode(&[7; 32]);
    let err = Key::jwk_json(
        format!(r#"{{"kty":"AKP","alg":"ML-DSA-44","pub":"{public}","priv":"{private}"}}"#)
            .as_bytes(),
        None,
        false,
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidKey);
    assert!(err.message().contains("private"));
    assert!(!err.message().contains(&private));
    // No pub, pub not base64url, pub one byte short or long, an SPKI as pub.
    assert_eq!(
        refused(r#"{"kty":"AKP","alg":"ML-DSA-44"}"#.to_owned()),
        ErrorKind::InvalidKey
    );
    assert_eq!(
        refused(r#"{"kty":"AKP","alg":"ML-DSA-44","pub":"a+b/"}"#.to_owned()),
        ErrorKind::InvalidKey
    );
    let raw = signer.public();
    let spki = signer.pair.public_key().as_der().unwrap();
    for bad in [&raw[1..], &[&raw[..], &[0]].concat()[..], spki.as_ref()] {
        let err = Key::jwk_json(
            format!(
                r#"{{"kty":"AKP","alg":"ML-DSA-44","pub":"{}"}}"#,
                token::encode(bad)
            )
            .as_bytes(),
            None,
            false,
        )
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidKey);
        assert!(err.message().contains("1312 bytes"), "{}", err.message());
    }
    // Meant for encryption: refused like any other JWK.
    assert_eq!(
        refused(format!(
            r#"{{"kty":"AKP","alg":"ML-DSA-44","use":"enc","pub":"{public}"}}"#
        )),
        ErrorKind::InvalidKey
    );
}

#[test]
fn other_key_types_never_take_an_mldsa_name() {
    let rsa_n = token::encode(&[0xC5; 256]);
    for alg in ["ML-DSA-44", "ML-DSA-65", "ML-DSA-87"] {
        for jwk in [
            format!(r#"{{"kty":"RSA","alg":"{alg}","n":"{rsa_n}","e":"AQAB"}}"#),
            format!(
                r#"{{"kty":"OKP","crv":"Ed25519","alg":"{alg}","x":"{}"}}"#,
                token::encode(&[9; 32])
            ),
            format!(
                r#"{{"kty":"EC","crv":"P-256","alg":"{alg}","x":"{0}","y":"{0}"}}"#,
                token::encode(&[9; 32])
            ),
            format!(
                r#"{{"kty":"oct","alg":"{alg}","k":"{}"}}"#,
                token::encode(&[9; 64])
            ),
        ] {
            assert_eq!(
                kind(Key::jwk_json(jwk.as_bytes(), None, true)),
                ErrorKind::InvalidKey,
                "{jwk}"
            );
        }
        let algorithm = Algorithm::from_name(alg.as_bytes()).unwrap();
        assert_eq!(
            kind(Key::secret(&[9; 64], algorithm, None)),
            ErrorKind::InvalidKey
        );
    }
}

#[test]
fn spki_pem_binds_its_parameter_set() {
    for (algorithm, ..) in SETS {
        let signer = Signer::new(algorithm);
        let der = signer.pair.public_key().as_der().unwrap();
        let pem = pem::encode(&pem::Pem::new("PUBLIC KEY", der.as_ref().to_vec()));
        let key = Key::pem(pem.as_bytes(), algorithm, None).unwrap();
        assert_eq!(key.kty(), KeyType::Akp);
        // The same key, from its JWK, has the same fingerprint.
        assert_eq!(key.fingerprint(), signer.key().fingerprint());
        let signature = signer.sign(b"m");
        assert!(key.verify(algorithm, b"m", &signature).is_ok());
        for other in Algorithm::ALL.into_iter().filter(|a| *a != algorithm) {
            assert!(
                Key::pem(pem.as_bytes(), other, None).is_err(),
                "{}",
                other.name()
            );
        }
    }
}

fn verifier(keys: Vec<Key>, algorithms: Option<Vec<&str>>) -> Result<Verifier> {
    let keys = KeySet::new(keys.into_iter().map(Arc::new).collect())?;
    let policy = Policy::new(PolicyOptions {
        algorithms: algorithms.map(|names| names.into_iter().map(str::to_owned).collect()),
        ..Default::default()
    })?;
    Verifier::new(Arc::new(keys), Arc::new(policy))
}

#[test]
fn mldsa_is_allowed_only_when_named() {
    let signer = Signer::new(Algorithm::MlDsa65);
    let token = signer.token(r#"{"alg":"ML-DSA-65"}"#, r#"{"sub":"a","exp":10}"#);
    // Left to the keys, an ML-DSA key alone allows nothing.
    let err = verifier(vec![signer.key()], None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidConfig);
    assert!(err.message().contains("ML-DSA"));
    // Beside a classical key, the default allows the classical one only.
    let hmac = Key::secret(&[1; 32], Algorithm::HS256, Some("h".into())).unwrap();
    let mixed = verifier(vec![signer.key(), hmac], None).unwrap();
    assert!(mixed.allows(Algorithm::HS256));
    assert!(!mixed.allows(Algorithm::MlDsa65));
    let err = mixed.verify(token.as_bytes(), 0.0).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Algorithm);
    // A key serves it: the refusal is the policy's, and names the algorithm.
    assert!(err
        .context()
        .contains(&("refused_by", Detail::Text("policy".into()))));
    assert!(err.message().contains("ML-DSA-65"), "{}", err.message());
    // Named, it verifies.
    let named = verifier(vec![signer.key()], Some(vec!["ML-DSA-65"])).unwrap();
    assert!(named.verify(token.as_bytes(), 0.0).is_ok());
}

#[test]
fn tokens_of_another_parameter_set_or_size_are_refused() {
    let signer44 = Signer::new(Algorithm::MlDsa44);
    let signer65 = Signer::new(Algorithm::MlDsa65);
    let all = Some(vec!["ML-DSA-44", "ML-DSA-65", "ML-DSA-87"]);
    let v = verifier(vec![signer44.key()], all.clone()).unwrap();
    let good = signer44.token(r#"{"alg":"ML-DSA-44"}"#, r#"{"exp":10}"#);
    assert!(v.verify(good.as_bytes(), 0.0).is_ok());
    // An ML-DSA-65 token (its own alg, or relabelled) against an ML-DSA-44 key.
    let other = signer65.token(r#"{"alg":"ML-DSA-65"}"#, "{}");
    // (ML-DSA-65 is named but no key serves it: refused as an alg.)
    assert_eq!(kind(v.verify(other.as_bytes(), 0.0)), ErrorKind::Algorithm);
    let relabelled = signer65.token(r#"{"alg":"ML-DSA-44"}"#, "{}");
    assert_eq!(
        kind(v.verify(relabelled.as_bytes(), 0.0)),
        ErrorKind::Signature
    );
    // Truncated and extended signature segments.
    let (input, signature) = good.rsplit_once('.').unwrap();
    for bad in [
        &signature[..signature.len() - 1],
        &signature[..signature.len() - 4],
        &format!("{signature}A"),
        &format!("{signature}AAAA"),
        "AAAA",
    ] {
        let token = format!("{input}.{bad}");
        assert_eq!(
            kind(v.verify(token.as_bytes(), 0.0)),
            ErrorKind::Signature,
            "{}",
            bad.len()
        );
    }
}

#[test]
fn classical_tokens_never_reach_an_akp_key() {
    let signer = Signer::new(Algorithm::MlDsa44);
    let v = verifier(vec![signer.key()], Some(vec!["ML-DSA-44"])).unwrap();
    let payload = token::encode(b"{}");
    for alg in [
        "HS256", "RS256", "PS256", "ES256", "ES256K", "EdDSA", "Ed25519",
    ] {
        let header = token::encode(format!(r#"{{"alg":"{alg}"}}"#).as_bytes());
        let forged = format!("{header}.{payload}.{}", token::encode(&[0; 64]));
        assert_eq!(
            kind(v.verify(forged.as_bytes(), 0.0)),
            ErrorKind::Algorithm,
            "{alg}"
        );
    }
    // Even allowed by name, a classical alg finds no AKP key.
    let hmac = Key::secret(&[1; 32], Algorithm::HS256, Some("h".into())).unwrap();
    let both = verifier(vec![signer.key(), hmac], Some(vec!["ML-DSA-44", "HS256"])).unwrap();
    let header = token::encode(br#"{"alg":"HS256","kid":"nope"}"#);
    let forged = format!("{header}.{payload}.{}", token::encode(&[0; 32]));
    assert_eq!(
        kind(both.verify(forged.as_bytes(), 0.0)),
        ErrorKind::UnknownKey
    );
}

#[test]
fn akp_thumbprint_covers_alg_kty_pub() {
    let signer = Signer::new(Algorithm::MlDsa44);
    let public = token::encode(&signer.public());
    let jwk =
        format!(r#"{{"pub":"{public}","kid":"k","kty":"AKP","use":"sig","alg":"ML-DSA-44"}}"#);
    let canonical = format!(r#"{{"alg":"ML-DSA-44","kty":"AKP","pub":"{public}"}}"#);
    let got = crate::dpop::thumbprint(&Value::parse(jwk.as_bytes(), 8).unwrap()).unwrap();
    assert_eq!(
        got,
        token::encode(&crate::digest::sha256(canonical.as_bytes()))
    );
    // Another parameter set name: another thumbprint; no alg: none.
    let renamed = jwk.replace("ML-DSA-44", "ML-DSA-65");
    assert_ne!(
        crate::dpop::thumbprint(&Value::parse(renamed.as_bytes(), 8).unwrap()).unwrap(),
        got
    );
    let bare = format!(r#"{{"kty":"AKP","pub":"{public}"}}"#);
    assert!(crate::dpop::thumbprint(&Value::parse(bare.as_bytes(), 8).unwrap()).is_err());
}

#[test]
fn dpop_allows_mldsa_only_when_named() {
    use crate::dpop::{ProofOptions, ProofVerifier};
    let default = ProofVerifier::new(ProofOptions::default()).unwrap();
    assert!(SETS.iter().all(|(a, ..)| !default.allows(*a)));
    assert!(default.allows(Algorithm::ES256));
    let named = ProofVerifier::new(ProofOptions {
        algorithms: Some(vec!["ML-DSA-44".into(), "ES256".into()]),
        ..Default::default()
    })
    .unwrap();
    assert!(named.allows(Algorithm::MlDsa44));
    assert!(!named.allows(Algorithm::MlDsa65));
}

#[test]
fn an_mldsa_dpop_proof_verifies_when_named() {
    use crate::dpop::{thumbprint, ProofOptions, ProofVerifier};
    let signer = Signer::new(Algorithm::MlDsa44);
    let header = format!(
        r#"{{"typ":"dpop+jwt","alg":"ML-DSA-44","jwk":{}}}"#,
        signer.jwk()
    );
    let access = b"access.token.bytes";
    let claims = format!(
        r#"{{"jti":"j","htm":"GET","htu":"https://a.example/x","iat":1000,"ath":"{}"}}"#,
        token::encode(&crate::digest::sha256(access))
    );
    let proof = signer.token(&header, &claims);
    let jkt = thumbprint(&Value::parse(signer.jwk().as_bytes(), 8).unwrap()).unwrap();
    let named = ProofVerifier::new(ProofOptions {
        algorithms: Some(vec!["ML-DSA-44".into()]),
        ..Default::default()
    })
    .unwrap();
    let verify = |v: &ProofVerifier, proof: &[u8]| {
        v.verify(proof, "GET", "https://a.example/x", access, &jkt, 1000.0)
    };
    let accepted = verify(&named, proof.as_bytes()).unwrap();
    assert_eq!(accepted.algorithm, Algorithm::MlDsa44);
    let default = ProofVerifier::new(ProofOptions::default()).unwrap();
    assert!(verify(&default, proof.as_bytes()).is_err());
    let (input, _) = proof.rsplit_once('.').unwrap();
    let forged = format!("{input}.{}", token::encode(&[0; 2420]));
    assert!(verify(&named, forged.as_bytes()).is_err());
}
