//! Recognising a public key in the forms people paste where a secret goes.
//!
//! A public key must never become an HMAC secret: anyone holding the
//! public key could then forge tokens. [`is_public_key`] is what the secret
//! rule in [`super::rules`] asks; it refuses no real (random) secret.

use aws_lc_rs::signature::ParsedPublicKey;

use crate::der;
use crate::json::SkipBuilder;

/// Whether `bytes` is DER of a public key or certificate.
fn is_public_key_der(bytes: &[u8]) -> bool {
    bytes.first() == Some(&der::SEQUENCE)
        && (der::parse_spki(bytes).is_ok()
            || der::certificate_spki(bytes).is_ok()
            || der::rsa_components(bytes).is_ok())
}

/// Whether text is (or looks like) a JWK, a JWKS or a list of JWKs: JSON
/// at any nesting depth, with duplicate members, or a Python `repr` of one.
fn is_jwk_text(text: &[u8]) -> bool {
    if !matches!(text.first(), Some(b'{' | b'[' | b'(')) {
        return false;
    }
    // The member name in plain text (JSON, a Python repr, YAML-ish dumps).
    if memchr::memmem::find(text, b"kty").is_some() {
        return true;
    }
    // Escaped member names (`"k\u0074y"`): a lenient parse finds them.
    // A lenient walk: a JWK with a duplicate member is still a public key.
    let mut found = false;
    let _ = crate::json::document(
        text,
        &mut SkipBuilder::lenient(|name: &str| found |= name == "kty" || name == "keys"),
        512,
    );
    found
}

/// An uncompressed EC point on a supported curve, with or without its
/// leading 0x04 (the raw `x || y` of a JWK). A random secret lands on a
/// curve with negligible probability, so this refuses no real secret.
fn is_raw_ec_point(bytes: &[u8]) -> bool {
    use aws_lc_rs::signature::{
        ECDSA_P256K1_SHA256_FIXED, ECDSA_P256_SHA256_FIXED, ECDSA_P384_SHA384_FIXED,
        ECDSA_P521_SHA512_FIXED,
    };
    let point: Vec<u8> = match bytes.len() {
        65 | 97 | 133 if bytes[0] == 0x04 => bytes.to_vec(),
        64 | 96 | 132 => [&[0x04], bytes].concat(),
        _ => return false,
    };
    let curves: &[&'static aws_lc_rs::signature::EcdsaVerificationAlgorithm] = match point.len() {
        65 => &[&ECDSA_P256_SHA256_FIXED, &ECDSA_P256K1_SHA256_FIXED],
        97 => &[&ECDSA_P384_SHA384_FIXED],
        _ => &[&ECDSA_P521_SHA512_FIXED],
    };
    curves
        .iter()
        .any(|curve| ParsedPublicKey::new(*curve, &point).is_ok())
}

/// The SSH wire form of a public key or certificate (RFC 4253 §6.6): a
/// length-prefixed key-type name such as `ssh-ed25519`.
fn is_ssh_blob(bytes: &[u8]) -> bool {
    let Some((length, rest)) = bytes.split_first_chunk::<4>() else {
        return false;
    };
    let length = u32::from_be_bytes(*length) as usize;
    (1..=64).contains(&length) && rest.len() > length && is_ssh_key_type(&rest[..length])
}

/// An OpenSSH key-type name: `ssh-rsa`, `ecdsa-sha2-nistp256`,
/// `ssh-ed25519-cert-v01@openssh.com`, `sk-ssh-ed25519@openssh.com`, ...
fn is_ssh_key_type(name: &[u8]) -> bool {
    const PREFIXES: [&[u8]; 6] = [
        b"ssh-",
        b"ecdsa-sha2-",
        b"sk-ssh-",
        b"sk-ecdsa-",
        b"rsa-sha2-",
        b"x509v3-",
    ];
    name.len() <= 64
        && PREFIXES.iter().any(|p| name.starts_with(p))
        && name
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'@' | b'.' | b'_'))
}

/// An OpenSSH public key or certificate line (`authorized_keys`,
/// `known_hosts`, `*.pub`, `*-cert.pub`), options and host names included:
/// some field names a key type, or is the base64 of an SSH key blob.
fn is_ssh_line(text: &[u8]) -> bool {
    let fields: Vec<&[u8]> = text
        .split(u8::is_ascii_whitespace)
        .filter(|f| !f.is_empty())
        .collect();
    fields.iter().enumerate().any(|(i, field)| {
        (is_ssh_key_type(field) && i + 1 < fields.len())
            || (field.starts_with(b"AAAA")
                && base64_simd::STANDARD
                    .decode_to_vec(field)
                    .is_ok_and(|blob| is_ssh_blob(&blob)))
    })
}

/// Hex text (any case, optional `:` or whitespace separators) decoded.
fn hex_decode(text: &[u8]) -> Option<Vec<u8>> {
    let digits: Vec<u8> = text
        .iter()
        .copied()
        .filter(|b| !(b.is_ascii_whitespace() || *b == b':'))
        .collect();
    if digits.len() < 2 || digits.len() % 2 != 0 {
        return None;
    }
    let value = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    digits
        .chunks_exact(2)
        .map(|pair| Some((value(pair[0])? << 4) | value(pair[1])?))
        .collect()
}

/// Binary forms of a public key: DER of a key or certificate, a raw EC
/// point, an SSH key blob.
fn is_public_key_binary(bytes: &[u8]) -> bool {
    is_public_key_der(bytes) || is_raw_ec_point(bytes) || is_ssh_blob(bytes)
}

/// A public key must never become an HMAC secret: anyone holding the public
/// key could then forge tokens. Refused: PEM (and RFC 4716 SSH) text, OpenSSH
/// public key and certificate lines, JWK/JWKS text (also after a BOM, with
/// duplicate members, nested deep, or as a Python `repr`), DER of a key or
/// certificate, a raw EC point, and the base64 (either alphabet, any
/// whitespace) or hex of those binary forms.
pub(super) fn is_public_key(secret: &[u8]) -> bool {
    const BOM: &[u8] = b"\xEF\xBB\xBF";
    let unmarked = secret.strip_prefix(BOM).unwrap_or(secret);
    let trimmed = unmarked.trim_ascii();
    if memchr::memmem::find(secret, b"-----BEGIN").is_some()
        || memchr::memmem::find(secret, b"---- BEGIN SSH2").is_some()
    {
        return true;
    }
    if is_ssh_line(trimmed) || is_jwk_text(trimmed) || is_public_key_binary(secret) {
        return true;
    }
    if let Some(bytes) = hex_decode(trimmed) {
        if is_public_key_binary(&bytes) {
            return true;
        }
    }
    // Base64 of DER (how some identity providers display a key): normalise
    // the URL-safe alphabet, then decode forgivingly (whitespace, padding).
    let standard: Vec<u8> = trimmed
        .iter()
        .map(|b| match b {
            b'-' => b'+',
            b'_' => b'/',
            other => *other,
        })
        .collect();
    base64_simd::forgiving_decode_to_vec(&standard).is_ok_and(|der| is_public_key_binary(&der))
}
