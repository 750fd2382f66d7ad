//! Reading the issuer of a token before it is verified, to route it.
//!
//! A service that trusts several issuers must pick the issuer's keys and
//! policy before it can check anything. This reads `iss` from the payload
//! with the same strict rules as a verification (size cap, three segments,
//! strict base64url, strict JSON with a depth cap and no duplicate names)
//! and trusts nothing it reads: the chosen issuer's verifier then checks the
//! signature with that issuer's keys only, and `iss` again under its policy.

use crate::error::Result;
use crate::json::Value;
use crate::token;

/// The unverified `iss` of `token`: `Some` when the payload is a JSON object
/// whose `iss` is a string, `None` when `iss` is absent or not a string.
///
/// Refuses what a verification would refuse before looking at the payload:
/// an oversize token, a wrong shape, bad base64url or bad JSON.
pub fn unverified_issuer(
    token: &[u8],
    max_token_size: usize,
    max_depth: usize,
) -> Result<Option<String>> {
    let segments = token::split(token, max_token_size)?;
    let payload = token::decode(segments.payload)?;
    let value = Value::parse(&payload, max_depth)?;
    Ok(value.get("iss").and_then(Value::as_str).map(str::to_owned))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn token(payload: &str) -> Vec<u8> {
        format!(
            "{}.{}.c2ln",
            token::encode(br#"{"alg":"RS256"}"#),
            token::encode(payload.as_bytes())
        )
        .into_bytes()
    }

    #[test]
    fn reads_a_string_issuer() {
        let found = unverified_issuer(&token(r#"{"iss":"https://a/","sub":"x"}"#), 8192, 64);
        assert_eq!(found.unwrap().as_deref(), Some("https://a/"));
    }

    #[test]
    fn absent_or_not_a_string_is_none() {
        for payload in [r#"{"sub":"x"}"#, r#"{"iss":1}"#, r#"{"iss":["a"]}"#, "[]"] {
            assert_eq!(unverified_issuer(&token(payload), 8192, 64).unwrap(), None);
        }
    }

    #[test]
    fn strict_like_a_verification() {
        let duplicate = token(r#"{"iss":"a","iss":"b"}"#);
        assert_eq!(
            unverified_issuer(&duplicate, 8192, 64).unwrap_err().kind(),
            ErrorKind::Malformed
        );
        let big = token(r#"{"iss":"a"}"#);
        assert_eq!(
            unverified_issuer(&big, 10, 64).unwrap_err().kind(),
            ErrorKind::TooLarge
        );
        assert!(unverified_issuer(b"a.b", 8192, 64).is_err());
        assert!(unverified_issuer(b"aGk.e30=.c2ln", 8192, 64).is_err());
        let deep = token(r#"{"x":[[[[1]]]]}"#);
        assert_eq!(
            unverified_issuer(&deep, 8192, 3).unwrap_err().kind(),
            ErrorKind::TooLarge
        );
    }
}
