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
