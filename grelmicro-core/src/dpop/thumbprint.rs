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
    let kty = KeyType::from_jwk(text("kty")?);
    let mut canonical = String::with_capacity(256);
    match kty {
        Some(KeyType::Rsa) => {
            let _ = write!(
                canonical,
                r#"{{"e":"{}","kty":"RSA","n":"{}"}}"#,
                text("e")?,
                text("n")?
            );
        }
        Some(KeyType::Ec) => {
            let _ = write!(
                canonical,
                r#"{{"crv":"{}","kty":"EC","x":"{}","y":"{}"}}"#,
                text("crv")?,
                text("x")?,
                text("y")?
            );
        }
        Some(KeyType::Okp) => {
            let _ = write!(
                canonical,
                r#"{{"crv":"{}","kty":"OKP","x":"{}"}}"#,
                text("crv")?,
                text("x")?
            );
        }
        Some(KeyType::Oct) | None => {
            return Err(Error::new(
                ErrorKind::InvalidKey,
                "JWK kty has no thumbprint here (RSA, EC or OKP)",
            ))
        }
    }
    Ok(token::encode(&crate::digest::sha256(canonical.as_bytes())))
}
