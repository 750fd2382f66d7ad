//! Tests of the X.509 form: shape, each key type's algorithm, skips.

use std::sync::OnceLock;

use aws_lc_rs::rsa::KeySize;
use aws_lc_rs::signature::{KeyPair, RsaKeyPair};

use super::*;
use crate::error::ErrorKind;
use crate::keyset::{KeySet, SkipCode};

/// A DER element: `tag`, its length, `contents`.
fn tlv(tag: u8, contents: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = contents.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes: Vec<u8> = len
            .to_be_bytes()
            .into_iter()
            .skip_while(|b| *b == 0)
            .collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend(bytes);
    }
    out.extend_from_slice(contents);
    out
}

/// A certificate around `spki` as PEM: the fields before it are present
/// but empty (only their structure is read), the signature is not checked.
fn certificate(spki: &[u8]) -> String {
    let empty = tlv(0x30, &[]);
    let tbs = [
        tlv(0xA0, &tlv(0x02, &[2])),
        tlv(0x02, &[1]),
        empty.clone(),
        empty.clone(),
        empty.clone(),
        empty.clone(),
        spki.to_vec(),
    ]
    .concat();
    let cert = [tlv(0x30, &tbs), empty, tlv(0x03, &[0])].concat();
    pem::encode(&pem::Pem::new("CERTIFICATE", tlv(0x30, &cert)))
}

fn rsa_spki() -> &'static [u8] {
    static SPKI: OnceLock<Vec<u8>> = OnceLock::new();
    SPKI.get_or_init(|| {
        let pair = RsaKeyPair::generate(KeySize::Rsa2048).unwrap();
        let algorithm = tlv(0x30, &[tlv(0x06, der::OID_RSA), vec![0x05, 0x00]].concat());
        let mut bits = vec![0];
        bits.extend_from_slice(pair.public_key().as_ref());
        tlv(0x30, &[algorithm, tlv(0x03, &bits)].concat())
    })
}

/// RFC 8032 §7.1 test 1's public key as an SPKI.
fn ed25519_spki() -> Vec<u8> {
    let x = crate::token::decode(b"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo").unwrap();
    let algorithm = tlv(0x30, &tlv(0x06, der::OID_ED25519));
    let mut bits = vec![0];
    bits.extend(x);
    tlv(0x30, &[algorithm, tlv(0x03, &bits)].concat())
}

fn document(entries: &[(&str, &str)]) -> String {
    let members: Vec<String> = entries
        .iter()
        .map(|(kid, pem)| format!("{kid:?}:{pem:?}"))
        .collect();
    format!("{{{}}}", members.join(","))
}

#[test]
fn a_map_of_kids_to_certificates_is_a_key_set() {
    let doc = document(&[
        ("r1", &certificate(rsa_spki())),
        ("e1", &certificate(&ed25519_spki())),
    ]);
    let set = KeySet::from_jwks(doc.as_bytes(), false, 10).unwrap();
    assert!(set.skipped().is_empty());
    let rsa = set.select(Some("r1"), Algorithm::RS256, false).unwrap();
    // RS256 alone: no other RSA algorithm, even when named.
    assert_eq!(rsa.algorithm(), Algorithm::RS256);
    assert!(!rsa.is_family());
    for other in [Algorithm::RS384, Algorithm::PS256] {
        assert!(set.select(Some("r1"), other, true).is_err(), "{other:?}");
    }
    let ed = set.select(Some("e1"), Algorithm::EdDSA, false).unwrap();
    assert_eq!(ed.algorithm(), Algorithm::EdDSA);
}

#[test]
fn the_shape_is_recognised_only_when_every_member_is_a_pem_text() {
    let cert = certificate(rsa_spki());
    let keys_member = format!(r#"{{"keys":{cert:?}}}"#);
    let mixed = format!(r#"{{"a":{cert:?},"b":1}}"#);
    for doc in ["{}", r#"{"a":"b"}"#, keys_member.as_str(), mixed.as_str()] {
        let err = KeySet::from_jwks(doc.as_bytes(), false, 10).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidKey, "{doc}");
        assert!(err.message().contains("no keys array"), "{}", err.message());
    }
}

#[test]
fn unusable_certificates_are_skipped_with_a_reason_and_no_material() {
    let good = certificate(rsa_spki());
    let truncated = good.replace("MII", "MIJ");
    let key_not_cert = pem::encode(&pem::Pem::new("PUBLIC KEY", rsa_spki().to_vec()));
    let unsupported = certificate(&tlv(
        0x30,
        &[tlv(0x30, &tlv(0x06, &[0x2A, 0x03])), tlv(0x03, &[0, 1])].concat(),
    ));
    let doc = document(&[
        ("good", &good),
        (
            "garbled",
            "-----BEGIN CERTIFICATE-----\n!!\n-----END CERTIFICATE-----\n",
        ),
        ("truncated", &truncated),
        ("key", &key_not_cert),
        ("odd", &unsupported),
        ("text", "not a certificate"),
    ]);
    let set = KeySet::from_jwks(doc.as_bytes(), false, 10).unwrap();
    assert!(set.select(Some("good"), Algorithm::RS256, false).is_ok());
    let skipped: Vec<_> = set
        .skipped()
        .iter()
        .map(|s| (s.kid.as_deref().unwrap(), s.code))
        .collect();
    assert_eq!(
        skipped,
        [
            ("garbled", SkipCode::InvalidKey),
            ("truncated", SkipCode::InvalidKey),
            ("key", SkipCode::InvalidKey),
            ("odd", SkipCode::InvalidKey),
            ("text", SkipCode::InvalidKey),
        ]
    );
    let body = good.lines().nth(1).unwrap();
    for skip in set.skipped() {
        assert!(skip.reason.starts_with("certificate: "), "{}", skip.reason);
        assert!(!skip.reason.contains(&body[..16]), "{}", skip.reason);
    }
}

#[test]
fn no_usable_certificate_or_too_many_is_an_error() {
    let doc = document(&[(
        "a",
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    )]);
    let err = KeySet::from_jwks(doc.as_bytes(), false, 10).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidKey);
    assert_eq!(err.message(), "no usable key");
    let cert = certificate(&ed25519_spki());
    let doc = document(&[("a", &cert), ("b", &cert), ("c", &cert)]);
    let err = KeySet::from_jwks(doc.as_bytes(), false, 2).unwrap_err();
    assert_eq!(err.message(), "JWKS holds 3 keys, over the limit of 2");
}
