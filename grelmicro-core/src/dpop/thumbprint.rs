//! The RFC 7638 JWK thumbprint, what a token's `cnf.jkt` names.

use std::fmt::Write as _;

use crate::error::{Error, ErrorKind, Result};
use crate::json::Value;
use crate::key::KeyType;
use crate::token;

/// The RFC 7638 JWK SHA-256 thumbprint (unpadded base64url) of a public
/// JWK: the required members in lexicographic order, no whitespace.
pub fn thumbprint(jwk: &Value) -> Result<String> {
    let text = |name: &str| -> Result<&str> {
        let value = jwk.get(name).and_then(Value::as_str).ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidKey,
                "JWK lacks a member its thumbprint needs",
            )
        })?;
        // Base64url values and registered names only: nothing to escape.
        if value.is_empty()
            || !value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
        {
            return Err(Error::new(
                ErrorKind::InvalidKey,
                "JWK member is not a base64url value or a curve name",
            ));
        }
        Ok(value)
    };
    // The required members of each key type, in lexicographic order.
    let (kty, members): (&str, &[&str]) = match KeyType::from_jwk(text("kty")?) {
        Some(KeyType::Rsa) => ("RSA", &["e", "kty", "n"]),
        Some(KeyType::Ec) => ("EC", &["crv", "kty", "x", "y"]),
        Some(KeyType::Okp) => ("OKP", &["crv", "kty", "x"]),
        // RFC 9964: an AKP key's thumbprint covers its alg, kty and pub.
        Some(KeyType::Akp) => ("AKP", &["alg", "kty", "pub"]),
        Some(KeyType::Oct) | None => {
            return Err(Error::new(
                ErrorKind::InvalidKey,
                "JWK kty has no thumbprint here (RSA, EC, OKP or AKP)",
            ))
        }
    };
    if kty == "RSA" {
        // RFC 7518 §6.3.1: n and e are the shortest big-endian octets. With
        // leading zeros allowed, one key would have many thumbprints.
        for name in ["n", "e"] {
            let bytes = token::decode(text(name)?.as_bytes()).map_err(|_| {
                Error::new(ErrorKind::InvalidKey, "JWK member is not valid base64url")
            })?;
            if bytes.first().is_none_or(|b| *b == 0) {
                return Err(Error::new(
                    ErrorKind::InvalidKey,
                    "RSA JWK n or e has leading zero octets (RFC 7518 requires the shortest form)",
                ));
            }
        }
    }
    let mut canonical = String::with_capacity(256);
    for (index, &name) in members.iter().enumerate() {
        let value = if name == "kty" { kty } else { text(name)? };
        let separator = if index == 0 { '{' } else { ',' };
        let _ = write!(canonical, r#"{separator}"{name}":"{value}""#);
    }
    canonical.push('}');
    Ok(token::encode(&crate::digest::sha256(canonical.as_bytes())))
}
