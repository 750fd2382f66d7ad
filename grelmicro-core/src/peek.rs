//! Reading the issuer of a token before it is verified, to route it.
//!
//! A service that trusts several issuers must pick the issuer's keys and
//! policy before it can check anything. This reads `iss` from the payload
//! with the same strict rules as a verification (size cap, three segments,
//! strict base64url, strict JSON with a depth cap and no duplicate names)
//! and trusts nothing it reads: the chosen issuer's verifier then checks the
//! signature with that issuer's keys only, and `iss` again under its policy.

use jiter::{Jiter, Peek};

use crate::error::Result;
use crate::json::{self, duplicate_member, SkipBuilder};
use crate::token;

/// The unverified `iss` of `token`: `Some` when the payload is a JSON object
/// whose `iss` is a string, `None` when `iss` is absent or not a string.
///
/// Refuses what a verification would refuse before looking at the payload:
/// an oversize token, a wrong shape, bad base64url, bad JSON (duplicate
/// `iss`, duplicate names in nested objects, nesting past `max_depth`).
/// Only `iss` is built; every other value is checked and skipped.
pub fn unverified_issuer(
    token: &[u8],
    max_token_size: usize,
    max_depth: usize,
) -> Result<Option<String>> {
    let segments = token::split(token, max_token_size)?;
    let payload = token::decode(segments.payload)?;
    let mut jiter = Jiter::new(&payload);
    let peek = jiter.peek()?;
    if peek != Peek::Object {
        json::value(&mut jiter, peek, &mut SkipBuilder::strict(), 0, max_depth)?;
        jiter.finish()?;
        return Ok(None);
    }
    if max_depth == 0 {
        return Err(json::too_deep());
    }
    let mut issuer: Option<Option<String>> = None;
    let mut next = jiter.known_object()?.map(|name| name == "iss");
    while let Some(is_issuer) = next {
        let peek = jiter.peek()?;
        if is_issuer {
            if issuer.is_some() {
                return Err(duplicate_member());
            }
            issuer = Some(if peek == Peek::String {
                Some(jiter.known_str()?.to_owned())
            } else {
                json::value(&mut jiter, peek, &mut SkipBuilder::strict(), 1, max_depth)?;
                None
            });
        } else {
            json::value(&mut jiter, peek, &mut SkipBuilder::strict(), 1, max_depth)?;
        }
        next = jiter.next_key()?.map(|name| name == "iss");
    }
    jiter.finish()?;
    Ok(issuer.flatten())
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
        let trailing = token(r#"{"iss":"a"} x"#);
        assert!(unverified_issuer(&trailing, 8192, 64).is_err());
        let nested_duplicate = token(r#"{"iss":"a","x":{"k":1,"k":2}}"#);
        assert!(unverified_issuer(&nested_duplicate, 8192, 64).is_err());
        let deep = token(r#"{"x":[[[[1]]]]}"#);
        assert_eq!(
            unverified_issuer(&deep, 8192, 3).unwrap_err().kind(),
            ErrorKind::TooLarge
        );
    }
}
