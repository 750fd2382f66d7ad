//! Tests of key building and the refusal rules.

use aws_lc_rs::hmac;

use super::rules::{check_rsa, ED25519_SMALL_ORDER};
use super::*;
use crate::token;

#[test]
fn secret_rules() {
    assert!(Key::secret(&[7; 32], Algorithm::HS256, None).is_ok());
    let short = Key::secret(&[7; 31], Algorithm::HS256, None).unwrap_err();
    assert_eq!(short.kind(), ErrorKind::WeakKey);
    assert!(!short.message().contains('\u{7}'));
    assert_eq!(
        Key::secret(&[7; 47], Algorithm::HS384, None)
            .unwrap_err()
            .kind(),
        ErrorKind::WeakKey
    );
    assert_eq!(
        Key::secret(&[7; 64], Algorithm::RS256, None)
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidKey
    );
    let pem = b"-----BEGIN PUBLIC KEY-----\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n-----END PUBLIC KEY-----\n";
    assert_eq!(
        Key::secret(pem, Algorithm::HS256, None).unwrap_err().kind(),
        ErrorKind::InvalidKey
    );
    let jwk = br#"{"kty":"RSA","n":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","e":"AQAB"}"#;
    assert_eq!(
        Key::secret(jwk, Algorithm::HS256, None).unwrap_err().kind(),
        ErrorKind::InvalidKey
    );
    assert_eq!(
        Key::secret(&[7; 32], Algorithm::HS256, Some(String::new()))
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidKey
    );
}

#[test]
fn hmac_verifies_and_rejects() {
    let key = Key::secret(&[1; 32], Algorithm::HS256, None).unwrap();
    let tag = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, &[1; 32]), b"msg");
    assert!(key.verify(Algorithm::HS256, b"msg", tag.as_ref()).is_ok());
    let err = key
        .verify(Algorithm::HS256, b"msh", tag.as_ref())
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Signature);
    assert!(key
        .verify(Algorithm::HS256, b"msg", &tag.as_ref()[..16])
        .is_err());
}

#[test]
fn rsa_exponent_and_size_rules() {
    let n2048 = {
        let mut n = vec![0xC5u8; 256];
        n[255] = 0x01;
        n
    };
    assert!(check_rsa(&n2048, &[0x01, 0x00, 0x01]).is_ok());
    assert_eq!(
        check_rsa(&n2048, &[0x03]).unwrap_err().kind(),
        ErrorKind::WeakKey
    );
    assert_eq!(
        check_rsa(&n2048, &[0x01, 0x00, 0x00]).unwrap_err().kind(),
        ErrorKind::WeakKey
    );
    assert_eq!(
        check_rsa(&n2048, &[0x01, 0x00, 0x02]).unwrap_err().kind(),
        ErrorKind::WeakKey
    );
    assert_eq!(
        check_rsa(&n2048[1..], &[0x01, 0x00, 0x01])
            .unwrap_err()
            .kind(),
        ErrorKind::WeakKey
    );
}

#[test]
fn jwk_refusals() {
    let cases: [(&str, ErrorKind); 8] = [
        (
            r#"{"kty":"oct","k":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","alg":"HS256"}"#,
            ErrorKind::InvalidKey,
        ),
        (
            r#"{"kty":"EC","crv":"P-256","x":"AA","y":"AA","use":"enc"}"#,
            ErrorKind::InvalidKey,
        ),
        (
            r#"{"kty":"EC","crv":"P-256","x":"AA","y":"AA","key_ops":["sign"]}"#,
            ErrorKind::InvalidKey,
        ),
        (
            r#"{"kty":"EC","crv":"P-256","x":"AA","y":"AA","d":"AA"}"#,
            ErrorKind::InvalidKey,
        ),
        (r#"{"kty":"RSA","n":"AQAB","e":"AQAB"}"#, ErrorKind::WeakKey),
        (
            r#"{"kty":"EC","crv":"P-256","x":"AA","y":"AA"}"#,
            ErrorKind::InvalidKey,
        ),
        (
            r#"{"kty":"OKP","crv":"X25519","x":"AA"}"#,
            ErrorKind::InvalidKey,
        ),
        (r#"{"kty":"XYZ"}"#, ErrorKind::InvalidKey),
    ];
    for (text, kind) in cases {
        let err = Key::jwk_json(text.as_bytes(), None, false).unwrap_err();
        assert_eq!(err.kind(), kind, "{text}");
    }
}

#[test]
fn oct_jwk_with_opt_in() {
    let text = br#"{"kty":"oct","k":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","alg":"HS256","kid":"s"}"#;
    let key = Key::jwk_json(text, None, true).unwrap();
    assert_eq!(key.algorithm(), Algorithm::HS256);
    assert_eq!(key.kid(), Some("s"));
    assert_eq!(key.kty(), KeyType::Oct);
    assert_eq!(key.kty().as_str(), "oct");
}

#[test]
fn public_key_forms_are_not_hmac_secrets() {
    // An Ed25519 SPKI (valid DER) in raw, base64 and base64url-with-newlines forms.
    let mut spki = vec![
        0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
    ];
    spki.extend_from_slice(&[0x11; 32]);
    let standard = base64_simd::STANDARD.encode_to_string(&spki);
    let wrapped = format!("{}\n{}\n", &standard[..20], &standard[20..]);
    let url = token::encode(&spki);
    let jwks = br#"{"keys":[{"kty":"oct","k":"AAAA"}]}"#.to_vec();
    for secret in [
        spki.clone(),
        standard.into_bytes(),
        wrapped.into_bytes(),
        url.into_bytes(),
        jwks,
    ] {
        let err = Key::secret(&secret, Algorithm::HS256, None).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidKey);
    }
    // Ordinary random-looking secrets stay accepted.
    assert!(Key::secret(b"0123456789abcdef0123456789abcdef", Algorithm::HS256, None).is_ok());
    assert!(Key::secret(&[0x30; 40], Algorithm::HS256, None).is_ok());
}

pub(super) fn to_hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

fn ssh_blob(name: &str) -> Vec<u8> {
    let mut blob = (name.len() as u32).to_be_bytes().to_vec();
    blob.extend_from_slice(name.as_bytes());
    blob.extend_from_slice(&32u32.to_be_bytes());
    blob.extend_from_slice(&[0x42; 32]);
    blob
}

fn refused(secret: &[u8]) -> bool {
    Key::secret(secret, Algorithm::HS256, None)
        .is_err_and(|e| e.kind() == ErrorKind::InvalidKey && e.message().contains("public key"))
}

#[test]
fn more_public_key_forms_are_not_hmac_secrets() {
    use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
    let n = token::encode(&[0xC5; 256]);
    let jwk = format!(r#"{{"kty":"RSA","n":"{n}","e":"AQAB"}}"#);
    // A JWK preceded by a UTF-8 byte order mark.
    assert!(refused(&[b"\xEF\xBB\xBF", jwk.as_bytes()].concat()));
    // A JWK with a duplicate member (a strict parse refuses it).
    let dup = format!(r#"{{"kty":"RSA","n":"{n}","e":"AQAB","e":"AQAB"}}"#);
    assert!(refused(dup.as_bytes()));
    // A JWK with an escaped member name.
    let escaped = format!(r#"{{"k\u0074y":"RSA","n":"{n}","e":"AQAB"}}"#);
    assert!(refused(escaped.as_bytes()));
    // A JWKS nested deeper than 8.
    let deep = format!(r#"{}{{"keys":[{jwk}]}}{}"#, "[".repeat(12), "]".repeat(12));
    assert!(refused(deep.as_bytes()));
    // The Python repr of a JWK dict.
    let repr = format!("{{'kty': 'RSA', 'n': '{n}', 'e': 'AQAB'}}");
    assert!(refused(repr.as_bytes()));
    // Hex-encoded DER (plain, upper case, colon-separated).
    let mut spki = vec![
        0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
    ];
    spki.extend_from_slice(&[0x11; 32]);
    let hex = to_hex(&spki);
    assert!(refused(hex.as_bytes()));
    assert!(refused(hex.to_uppercase().as_bytes()));
    let colons: Vec<String> = spki.iter().map(|b| format!("{b:02X}")).collect();
    assert!(refused(colons.join(":").as_bytes()));
    // OpenSSH public keys and certificate lines, with options and comments.
    let b64 = |blob: &[u8]| base64_simd::STANDARD.encode_to_string(blob);
    for (name, line) in [
        ("ssh-ed25519", "{name} {blob} user@host"),
        ("ssh-rsa", "from=\"10.0.0.1\",no-pty {name} {blob} deploy"),
        ("ssh-dss", "{name} {blob}"),
        ("ecdsa-sha2-nistp256", "host.example.com {name} {blob}"),
        (
            "ssh-ed25519-cert-v01@openssh.com",
            "{name} {blob} user@host",
        ),
        (
            "ssh-rsa-cert-v01@openssh.com",
            "cert-authority {name} {blob}",
        ),
        ("sk-ssh-ed25519@openssh.com", "{name} {blob}"),
    ] {
        let text = line
            .replace("{name}", name)
            .replace("{blob}", &b64(&ssh_blob(name)));
        assert!(refused(text.as_bytes()), "{text}");
        // The base64 blob alone, too.
        assert!(refused(b64(&ssh_blob(name)).as_bytes()), "{name}");
    }
    assert!(refused(
        b"---- BEGIN SSH2 PUBLIC KEY ----\nAAAA\n---- END SSH2 PUBLIC KEY ----"
    ));
    // A raw EC point: uncompressed, without its 0x04, in base64 and hex.
    let rng = aws_lc_rs::rand::SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).unwrap();
    let point = pair.public_key().as_ref().to_vec();
    assert_eq!(point.len(), 65);
    assert!(refused(&point));
    assert!(refused(&point[1..]));
    assert!(refused(token::encode(&point).as_bytes()));
    let hex = to_hex(&point);
    assert!(refused(hex.as_bytes()));
    // Ordinary secrets of the same shapes stay accepted.
    assert!(!refused(&[0x04; 65]));
    assert!(!refused(&[0x5A; 64]));
    assert!(!refused(b"{just a long secret with braces in it}"));
    assert!(!refused(b"ssh-this-is-my-secret-and-it-is-long"));
    assert!(!refused("0123456789abcdef".repeat(4).as_bytes()));
}

#[test]
fn pem_mistakes_are_named() {
    let message = |data: &[u8]| {
        Key::pem(data, Algorithm::RS256, None)
            .unwrap_err()
            .message()
            .to_owned()
    };
    assert!(message(b"/etc/keys/public.pem").contains("file path"));
    assert!(message(b"keys/public.pem").contains("file path"));
    assert!(
        message(b"-----BEGIN PUBLIC KEY-----\\nMIIB\\n-----END PUBLIC KEY-----")
            .contains("literal")
    );
    assert!(
        message(b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
            .contains("private key")
    );
    assert!(message(
        b"-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n"
    )
    .contains("signing request"));
    assert!(message(b"hello").contains("not a PEM document"));
}

#[test]
fn small_order_ed25519_keys_are_refused() {
    for point in ED25519_SMALL_ORDER {
        let jwk = format!(
            r#"{{"kty":"OKP","crv":"Ed25519","x":"{}"}}"#,
            token::encode(&point)
        );
        let err = Key::jwk_json(jwk.as_bytes(), None, false).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidKey);
        let mut spki = vec![
            0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
        ];
        spki.extend_from_slice(&point);
        assert_eq!(
            Key::spki(&spki, Algorithm::EdDSA, None).unwrap_err().kind(),
            ErrorKind::InvalidKey
        );
    }
    // RFC 8032 §7.1, test 1: an ordinary public key still builds.
    let rfc8032: [u8; 32] = [
        0xd7, 0x5a, 0x98, 0x01, 0x82, 0xb1, 0x0a, 0xb7, 0xd5, 0x4b, 0xfe, 0xd3, 0xc9, 0x64, 0x07,
        0x3a, 0x0e, 0xe1, 0x72, 0xf3, 0xda, 0xa6, 0x23, 0x25, 0xaf, 0x02, 0x1a, 0x68, 0xf7, 0x07,
        0x51, 0x1a,
    ];
    let jwk = format!(
        r#"{{"kty":"OKP","crv":"Ed25519","x":"{}"}}"#,
        token::encode(&rfc8032)
    );
    assert!(Key::jwk_json(jwk.as_bytes(), None, false).is_ok());
}

#[test]
fn ec_point_off_curve_is_refused() {
    let x = token::encode(&[1u8; 32]);
    let y = token::encode(&[2u8; 32]);
    let text = format!(r#"{{"kty":"EC","crv":"P-256","x":"{x}","y":"{y}"}}"#);
    let err = Key::jwk_json(text.as_bytes(), None, false).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidKey);
}

#[test]
fn curve_and_key_type_names_round_trip() {
    for kty in [KeyType::Oct, KeyType::Rsa, KeyType::Ec, KeyType::Okp] {
        assert_eq!(KeyType::from_jwk(kty.as_str()), Some(kty));
    }
    assert_eq!(KeyType::from_jwk("rsa"), None);
    for (name, curve, alg) in [
        ("P-256", Curve::P256, Algorithm::ES256),
        ("P-384", Curve::P384, Algorithm::ES384),
        ("P-521", Curve::P521, Algorithm::ES512),
        ("secp256k1", Curve::Secp256k1, Algorithm::ES256K),
        ("Ed25519", Curve::Ed25519, Algorithm::EdDSA),
    ] {
        assert_eq!(Curve::from_jwk(name), Some(curve));
        assert_eq!(curve.algorithm(), alg);
        assert_eq!(Curve::for_algorithm(alg), Some(curve));
    }
    assert_eq!(
        Curve::for_algorithm(Algorithm::Ed25519),
        Some(Curve::Ed25519)
    );
    assert_eq!(Curve::for_algorithm(Algorithm::RS256), None);
    assert_eq!(Curve::from_jwk("X25519"), None);
}

// --- keys of JWKs without `alg`: bound to their key type's family -----------

mod family {
    use std::sync::{Arc, OnceLock};

    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::rsa::KeySize;
    use aws_lc_rs::signature::{self as sig, KeyPair, RsaEncoding, RsaKeyPair};

    use super::*;
    use crate::keyset::KeySet;
    use crate::policy::{Policy, PolicyOptions};
    use crate::verifier::Verifier;

    /// One RSA-2048 pair for every test here (generation is slow).
    fn pair() -> &'static RsaKeyPair {
        static PAIR: OnceLock<RsaKeyPair> = OnceLock::new();
        PAIR.get_or_init(|| RsaKeyPair::generate(KeySize::Rsa2048).unwrap())
    }

    /// The public half of [`pair`] as a JWK, with extra members.
    fn rsa_jwk(extra: &str) -> String {
        let (n, e) = der::rsa_components(pair().public_key().as_ref()).unwrap();
        format!(
            r#"{{"kty":"RSA","n":"{}","e":"{}"{extra}}}"#,
            token::encode(n),
            token::encode(e)
        )
    }

    fn encoding(alg: Algorithm) -> &'static dyn RsaEncoding {
        match alg {
            Algorithm::RS256 => &sig::RSA_PKCS1_SHA256,
            Algorithm::RS384 => &sig::RSA_PKCS1_SHA384,
            Algorithm::RS512 => &sig::RSA_PKCS1_SHA512,
            Algorithm::PS256 => &sig::RSA_PSS_SHA256,
            Algorithm::PS384 => &sig::RSA_PSS_SHA384,
            _ => &sig::RSA_PSS_SHA512,
        }
    }

    fn rsa_token(alg: Algorithm, kid: Option<&str>) -> String {
        let header = match kid {
            Some(kid) => format!(r#"{{"alg":"{}","kid":"{kid}"}}"#, alg.name()),
            None => format!(r#"{{"alg":"{}"}}"#, alg.name()),
        };
        let input = format!(
            "{}.{}",
            token::encode(header.as_bytes()),
            token::encode(br#"{"exp":10}"#)
        );
        let mut signature = vec![0; pair().public_modulus_len()];
        pair()
            .sign(
                encoding(alg),
                &SystemRandom::new(),
                input.as_bytes(),
                &mut signature,
            )
            .unwrap();
        format!("{input}.{}", token::encode(&signature))
    }

    fn verifier(keys: Vec<Key>, algorithms: Option<&[&str]>) -> Verifier {
        let keys = KeySet::new(keys.into_iter().map(Arc::new).collect()).unwrap();
        let policy = Policy::new(PolicyOptions {
            algorithms: algorithms.map(|names| names.iter().map(|n| (*n).to_owned()).collect()),
            ..Default::default()
        })
        .unwrap();
        Verifier::new(Arc::new(keys), Arc::new(policy)).unwrap()
    }

    const RSA: [Algorithm; 6] = [
        Algorithm::RS256,
        Algorithm::RS384,
        Algorithm::RS512,
        Algorithm::PS256,
        Algorithm::PS384,
        Algorithm::PS512,
    ];
    const RSA_NAMES: [&str; 6] = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512"];

    #[test]
    fn an_alg_less_rsa_jwk_serves_the_rsa_algorithms_the_verifier_names() {
        let key = Key::jwk_json(rsa_jwk("").as_bytes(), None, false).unwrap();
        assert!(key.is_family());
        assert_eq!(key.algorithm(), Algorithm::RS256);
        assert_eq!(key.algorithms().iter().collect::<Vec<_>>(), RSA.to_vec());
        let all = verifier(vec![key], Some(&RSA_NAMES));
        for alg in RSA {
            let token = rsa_token(alg, None);
            assert!(all.verify(token.as_bytes(), 0.0).is_ok(), "{}", alg.name());
        }
        // A signature made under one RSA algorithm never passes as another.
        let ps256 = rsa_token(Algorithm::PS256, None);
        let relabelled = format!(
            "{}.{}",
            token::encode(br#"{"alg":"PS384"}"#),
            ps256.split_once('.').unwrap().1
        );
        assert_eq!(
            all.verify(relabelled.as_bytes(), 0.0).unwrap_err().kind(),
            ErrorKind::Signature
        );
    }

    #[test]
    fn without_named_algorithms_an_alg_less_rsa_jwk_means_rs256() {
        let key = Key::jwk_json(rsa_jwk(r#","kid":"k""#).as_bytes(), None, false).unwrap();
        let v = verifier(vec![key], None);
        assert!(v
            .verify(rsa_token(Algorithm::RS256, Some("k")).as_bytes(), 0.0)
            .is_ok());
        for alg in &RSA[1..] {
            let err = v
                .verify(rsa_token(*alg, Some("k")).as_bytes(), 0.0)
                .unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Algorithm);
            // The refusal says why and what to pass.
            assert!(err.message().contains("RS256 only"), "{}", err.message());
            assert!(err.message().contains("algorithms="), "{}", err.message());
        }
        // Named algorithms choose within the family: PS256 alone.
        let key = Key::jwk_json(rsa_jwk("").as_bytes(), None, false).unwrap();
        let ps = verifier(vec![key], Some(&["PS256"]));
        assert!(ps
            .verify(rsa_token(Algorithm::PS256, None).as_bytes(), 0.0)
            .is_ok());
        assert_eq!(
            ps.verify(rsa_token(Algorithm::RS256, None).as_bytes(), 0.0)
                .unwrap_err()
                .kind(),
            ErrorKind::Algorithm
        );
    }

    #[test]
    fn a_family_never_crosses_into_another() {
        let key = Key::jwk_json(rsa_jwk("").as_bytes(), None, false).unwrap();
        // HMAC with an RSA key: not served, not even when HS256 is named.
        assert!(!key.serves(Algorithm::HS256, true));
        assert!(!key.serves(Algorithm::ES256, true));
        assert_eq!(
            key.verify(Algorithm::HS256, b"m", &[0; 32])
                .unwrap_err()
                .kind(),
            ErrorKind::Algorithm
        );
        let keys = KeySet::new(vec![Arc::new(key)]).unwrap();
        let policy = Policy::new(PolicyOptions {
            algorithms: Some(vec!["HS256".into()]),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            Verifier::new(Arc::new(keys), Arc::new(policy))
                .unwrap_err()
                .kind(),
            ErrorKind::InvalidConfig
        );
        // An HS256 token signed with the key's public bytes as a secret.
        let public = pair().public_key().as_ref().to_vec();
        let input = format!(
            "{}.{}",
            token::encode(br#"{"alg":"HS256"}"#),
            token::encode(br#"{"exp":10}"#)
        );
        let tag = hmac::sign(
            &hmac::Key::new(hmac::HMAC_SHA256, &public),
            input.as_bytes(),
        );
        let forged = format!("{input}.{}", token::encode(tag.as_ref()));
        let key = Key::jwk_json(rsa_jwk("").as_bytes(), None, false).unwrap();
        let v = verifier(vec![key], Some(&["HS256", "RS256"]));
        assert!(!v.allows(Algorithm::HS256));
        assert_eq!(
            v.verify(forged.as_bytes(), 0.0).unwrap_err().kind(),
            ErrorKind::Algorithm
        );
    }

    #[test]
    fn rsa_size_rules_hold_for_every_family_member() {
        let mut n = vec![0xC5u8; 128]; // 1024 bits
        n[127] = 0x01;
        let jwk = format!(r#"{{"kty":"RSA","n":"{}","e":"AQAB"}}"#, token::encode(&n));
        assert_eq!(
            Key::jwk_json(jwk.as_bytes(), None, false)
                .unwrap_err()
                .kind(),
            ErrorKind::WeakKey
        );
        assert_eq!(
            Key::jwk_json(jwk.as_bytes(), Some(Algorithm::PS256), false)
                .unwrap_err()
                .kind(),
            ErrorKind::WeakKey
        );
    }

    #[test]
    fn an_explicit_alg_still_binds_one_algorithm() {
        let key = Key::jwk_json(rsa_jwk(r#","alg":"PS256""#).as_bytes(), None, false).unwrap();
        assert!(!key.is_family());
        assert_eq!(
            key.algorithms(),
            crate::algorithm::AlgorithmSet::of(Algorithm::PS256)
        );
        let v = verifier(vec![key], Some(&RSA_NAMES));
        assert_eq!(
            v.verify(rsa_token(Algorithm::RS256, None).as_bytes(), 0.0)
                .unwrap_err()
                .kind(),
            ErrorKind::Algorithm
        );
        // Bound, family and the same key's fingerprints differ: a rotation
        // that changes what a key verifies is never "the same key".
        let bound = Key::jwk_json(rsa_jwk("").as_bytes(), Some(Algorithm::RS256), false).unwrap();
        let family = Key::jwk_json(rsa_jwk("").as_bytes(), None, false).unwrap();
        assert_ne!(bound.fingerprint(), family.fingerprint());
    }

    #[test]
    fn selection_rules_hold_with_family_keys() {
        let with_kid = |kid: &str| {
            Key::jwk_json(
                rsa_jwk(&format!(r#","kid":"{kid}""#)).as_bytes(),
                None,
                false,
            )
            .unwrap()
        };
        let family = |kid: Option<&str>| match kid {
            Some(kid) => with_kid(kid),
            None => Key::jwk_json(rsa_jwk("").as_bytes(), None, false).unwrap(),
        };
        // kid matching: the kid picks the key.
        let v = verifier(vec![with_kid("a")], Some(&RSA_NAMES));
        assert!(v
            .verify(rsa_token(Algorithm::PS512, Some("a")).as_bytes(), 0.0)
            .is_ok());
        assert_eq!(
            v.verify(rsa_token(Algorithm::PS512, Some("b")).as_bytes(), 0.0)
                .unwrap_err()
                .kind(),
            ErrorKind::UnknownKey
        );
        // A kid-less token needs exactly one candidate: a family key and
        // another RSA key bound to PS256 both could verify PS256 when it is
        // named...
        let mut n = vec![0xC5u8; 256];
        n[255] = 0x01;
        let other_pss = || {
            let jwk = format!(
                r#"{{"kty":"RSA","alg":"PS256","n":"{}","e":"AQAB"}}"#,
                token::encode(&n)
            );
            Key::jwk_json(jwk.as_bytes(), None, false).unwrap()
        };
        let named = verifier(vec![family(None), other_pss()], Some(&RSA_NAMES));
        assert_eq!(
            named
                .verify(rsa_token(Algorithm::PS256, None).as_bytes(), 0.0)
                .unwrap_err()
                .kind(),
            ErrorKind::UnknownKey
        );
        // ... while with no algorithms named the family key means RS256, so
        // the other PS256 key is the only candidate (and its signature check
        // fails: it is not the signer), and RS256 goes to the family key.
        let ec = Key::jwk_json(
            br#"{"kty":"EC","crv":"P-256","x":"MKBCTNIcKUSDii11ySs3526iDZ8AiTo7Tu6KPAqv7D4","y":"4Etl6SRW2YiLUrN5vfvVHuhp7x8PxltmWWlbbM4IFyM"}"#,
            None,
            false,
        )
        .unwrap();
        let default = verifier(vec![family(None), other_pss(), ec], None);
        assert_eq!(
            default
                .verify(rsa_token(Algorithm::PS256, None).as_bytes(), 0.0)
                .unwrap_err()
                .kind(),
            ErrorKind::Signature
        );
        assert!(default
            .verify(rsa_token(Algorithm::RS256, None).as_bytes(), 0.0)
            .is_ok());
        // The same key bound to PS256 and without alg is one key, not two.
        let same = Key::jwk_json(rsa_jwk(r#","alg":"PS256""#).as_bytes(), None, false).unwrap();
        let one = verifier(vec![family(None), same], Some(&RSA_NAMES));
        assert!(one
            .verify(rsa_token(Algorithm::PS256, None).as_bytes(), 0.0)
            .is_ok());
        // Two different family keys under one kid: the kid is unusable.
        let doc = format!(
            r#"{{"keys":[{},{}]}}"#,
            rsa_jwk(r#","kid":"dup""#),
            r#"{"kty":"RSA","kid":"dup","e":"AQAB","n":"AAAA"}"#
        );
        // (the second one is refused for its size, so the first stands)
        let set = KeySet::from_jwks(doc.as_bytes(), false, 10).unwrap();
        assert!(set.select(Some("dup"), Algorithm::PS256, true).is_ok());
        let other = format!(
            r#"{{"kty":"RSA","kid":"dup","n":"{}","e":"AQAB"}}"#,
            token::encode(&n)
        );
        let doc = format!(
            r#"{{"keys":[{},{other},{}]}}"#,
            rsa_jwk(r#","kid":"dup""#),
            rsa_jwk(r#","kid":"ok""#)
        );
        let set = KeySet::from_jwks(doc.as_bytes(), false, 10).unwrap();
        assert_eq!(
            set.select(Some("dup"), Algorithm::PS256, true)
                .unwrap_err()
                .kind(),
            ErrorKind::UnknownKey
        );
        assert!(set.select(Some("ok"), Algorithm::PS384, true).is_ok());
    }

    #[test]
    fn one_key_bound_and_alg_less_under_one_kid_is_one_key() {
        let bound = || {
            Key::jwk_json(
                rsa_jwk(r#","kid":"k""#).as_bytes(),
                Some(Algorithm::RS256),
                false,
            )
            .unwrap()
        };
        let family = || Key::jwk_json(rsa_jwk(r#","kid":"k""#).as_bytes(), None, false).unwrap();
        for keys in [vec![bound(), family()], vec![family(), bound()]] {
            let set = KeySet::new(keys.into_iter().map(Arc::new).collect()).unwrap();
            assert!(set.skipped().is_empty());
            assert!(set.select(Some("k"), Algorithm::RS256, false).is_ok());
        }
        // The same bytes bound to two different algorithms are two keys.
        let pss = Key::jwk_json(
            rsa_jwk(r#","kid":"k""#).as_bytes(),
            Some(Algorithm::PS256),
            false,
        )
        .unwrap();
        let err = KeySet::new(vec![Arc::new(bound()), Arc::new(pss)]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidConfig);
    }

    #[test]
    fn an_alg_less_oct_jwk_serves_the_hmac_algorithms_its_length_allows() {
        let jwk = |len: usize| {
            format!(
                r#"{{"kty":"oct","k":"{}"}}"#,
                token::encode(&vec![0x5a; len])
            )
        };
        let short = Key::jwk_json(jwk(32).as_bytes(), None, true).unwrap();
        assert!(short.is_family());
        assert_eq!(short.algorithm(), Algorithm::HS256);
        assert_eq!(
            short.algorithms(),
            crate::algorithm::AlgorithmSet::of(Algorithm::HS256)
        );
        let long = Key::jwk_json(jwk(64).as_bytes(), None, true).unwrap();
        assert_eq!(long.algorithms().iter().count(), 3);
        assert!(!long.serves(Algorithm::RS256, true));
        assert!(long.serves(Algorithm::HS512, true));
        assert!(!long.serves(Algorithm::HS512, false));
        let tag = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA512, &[0x5a; 64]), b"m");
        assert!(long.verify(Algorithm::HS512, b"m", tag.as_ref()).is_ok());
        assert_eq!(
            Key::jwk_json(jwk(31).as_bytes(), None, true)
                .unwrap_err()
                .kind(),
            ErrorKind::WeakKey
        );
        // Only where symmetric keys are allowed at all.
        assert_eq!(
            Key::jwk_json(jwk(64).as_bytes(), None, false)
                .unwrap_err()
                .kind(),
            ErrorKind::InvalidKey
        );
        let doc = format!(r#"{{"keys":[{}]}}"#, jwk(64));
        assert!(KeySet::from_jwks(doc.as_bytes(), false, 10).is_err());
        assert!(KeySet::from_jwks(doc.as_bytes(), true, 10).is_ok());
    }
}

// --- EC coordinates shorter than the curve size -----------------------------

/// The P-521 generator as a public key: its x has a leading zero byte, which
/// some libraries strip (65 bytes instead of 66).
const P521_GX: &str = "00c6858e06b70404e9cd9e3ecb662395b4429c648139053fb521f828af606b4d3dbaa14b5e77efe75928fe1dc127a2ffa8de3348b3c1856a429bf97e7e31c2e5bd66";
const P521_GY: &str = "011839296a789a3bc0045c8a5fb42c7d1bd998f54449579b446817afbd17273e662c97ee72995ef42640c550b9013fad0761353c7086a272c24088be94769fd16650";

fn from_hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

fn p521_jwk(x: &[u8], y: &[u8]) -> String {
    format!(
        r#"{{"kty":"EC","crv":"P-521","x":"{}","y":"{}"}}"#,
        token::encode(x),
        token::encode(y)
    )
}

#[test]
fn short_ec_coordinates_are_left_padded() {
    let (x, y) = (from_hex(P521_GX), from_hex(P521_GY));
    assert_eq!((x.len(), x[0]), (66, 0));
    let full = Key::jwk_json(p521_jwk(&x, &y).as_bytes(), None, false).unwrap();
    assert!(!full.padded());
    let short = Key::jwk_json(p521_jwk(&x[1..], &y).as_bytes(), None, false).unwrap();
    assert!(short.padded());
    assert_eq!(short.algorithm(), Algorithm::ES512);
    // The same integer, so the same key.
    assert_eq!(short.fingerprint(), full.fingerprint());
    // Longer than the curve size (a leading zero added), or empty: refused.
    let long = [&[0u8][..], &x].concat();
    for jwk in [
        p521_jwk(&long, &y),
        p521_jwk(&x, &[0; 67]),
        p521_jwk(&[], &y),
    ] {
        assert_eq!(
            Key::jwk_json(jwk.as_bytes(), None, false)
                .unwrap_err()
                .kind(),
            ErrorKind::InvalidKey
        );
    }
    // Padding does not make an off-curve point acceptable.
    let mut off = y.clone();
    off[65] ^= 1;
    assert_eq!(
        Key::jwk_json(p521_jwk(&x[1..], &off).as_bytes(), None, false)
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidKey
    );
}

/// Public-key text mangled on its way to `Key.secret`: stray punctuation,
/// quotes, a leading `-`, armour in another case. Each form is refused;
/// ordinary secrets of the same shapes are not.
#[test]
fn mangled_public_key_text_is_not_an_hmac_secret() {
    let mut ed_spki = vec![
        0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
    ];
    ed_spki.extend_from_slice(&[0x11; 32]);
    let mut n = vec![0xC5u8; 256];
    n[255] = 0x01;
    let pkcs1 = der::rsa_public_key(&n, &[0x01, 0x00, 0x01]);
    for der in [&ed_spki, &pkcs1] {
        let b64 = base64_simd::STANDARD.encode_to_string(der);
        let url = token::encode(der);
        let (head, tail) = b64.split_at(b64.len() / 2);
        let forms = [
            format!("{head}:{tail}"),
            format!("{head}.{tail}"),
            format!("{b64}."),
            format!("{b64}:"),
            format!("-{b64}"),
            format!("-{url}"),
            format!("_{url}"),
            format!("\"{b64}\""),
            format!("'{b64}'"),
            format!("`{b64}`"),
            format!("  \"{head}\\n{tail}\"\n"),
            format!("-----begin public key-----\n{b64}\n-----end public key-----\n"),
            format!("-----Begin Public Key-----\n{b64}\n-----End Public Key-----"),
            format!("----BEGIN PUBLIC KEY----\n{b64}\n----END PUBLIC KEY----"),
            format!("-- begin rsa public key --\n{b64}"),
        ];
        for form in &forms {
            assert!(refused(form.as_bytes()), "{form}");
        }
        // DER followed by a stray byte, a JWK in quotes.
        assert!(refused(&[der.as_slice(), b"\n"].concat()));
    }
    let n64 = token::encode(&n);
    assert!(refused(
        format!(r#""{{"kty":"RSA","n":"{n64}","e":"AQAB"}}""#).as_bytes()
    ));
    // Ordinary secrets, base64-looking ones and ones with dashes included.
    let random: Vec<u8> = (0..48u8)
        .map(|i| i.wrapping_mul(167).wrapping_add(13))
        .collect();
    let b64 = base64_simd::STANDARD.encode_to_string(&random);
    for secret in [
        b64.clone(),
        format!("-{b64}"),
        format!("\"{b64}\":"),
        token::encode(&random),
        base64_simd::STANDARD.encode_to_string([0x30; 48]),
        "my--end-of-key-passphrase-that-is-long-enough".to_owned(),
        "-----this-is-a-long-random-looking-secret-----".to_owned(),
        "0123456789abcdef".repeat(4),
    ] {
        assert!(!refused(secret.as_bytes()), "{secret}");
        assert!(Key::secret(secret.as_bytes(), Algorithm::HS256, None).is_ok());
    }
}

/// RFC 7638 §3.1's RSA modulus (2048 bits), as a JWK's `n`.
const RFC7638_N: &str = "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw";

#[test]
fn the_bare_text_of_a_public_member_is_no_secret() {
    // Issue 33, D5: an RSA `n` or an ML-DSA `pub` pasted as an HMAC secret.
    let n = token::decode(RFC7638_N.as_bytes()).unwrap();
    let hex = n.iter().fold(String::new(), |mut out, b| {
        use std::fmt::Write as _;
        let _ = write!(out, "{b:02x}");
        out
    });
    let standard = base64_simd::STANDARD.encode_to_string(&n);
    let mldsa = token::encode(&[0x5a; 1312]);
    let mldsa_87 = base64_simd::STANDARD.encode_to_string([0xa5; 2592]);
    for secret in [
        RFC7638_N.to_owned(),
        format!("  \"{RFC7638_N}\"\n"),
        hex.clone(),
        hex.to_uppercase(),
        standard,
        mldsa,
        mldsa_87,
    ] {
        let err = Key::secret(secret.as_bytes(), Algorithm::HS256, None).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidKey, "{secret:.20}");
        assert!(err.message().contains("public key material"));
        assert!(!err.message().contains(&RFC7638_N[..16]));
    }
    // What stays a secret: the usual random text, and long text that is no
    // modulus (even, or with a small factor, or without the top bit).
    let mut even = n.clone();
    *even.last_mut().unwrap() &= 0xfe;
    let mut low = n.clone();
    low[0] &= 0x7f;
    for secret in [
        token::encode(&[0x42; 32]),
        token::encode(&[0x42; 64]),
        token::encode(&even),
        token::encode(&low),
        token::encode(&[0xc3; 1311]),
    ] {
        assert!(
            Key::secret(secret.as_bytes(), Algorithm::HS256, None).is_ok(),
            "{secret:.20}"
        );
    }
}
