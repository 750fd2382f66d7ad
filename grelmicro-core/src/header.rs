//! The JOSE header of a compact JWS.
//!
//! Only `alg`, `kid`, `typ`, `crit` and `b64` carry meaning here. `jku`,
//! `x5u`, `jwk` and `x5c` are never used to pick a key: they are read past
//! like any other member, so a token cannot choose the key that checks it.

use std::collections::HashSet;

use jiter::{Jiter, Peek};

use crate::algorithm::Algorithm;
use crate::error::{capped, malformed, Detail, Error, ErrorKind, Result};
use crate::json::{duplicate_member, value, SkipBuilder};

/// What the verifier needs from a header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub alg: Algorithm,
    pub kid: Option<String>,
    pub typ: Option<String>,
}

/// The header members that carry meaning here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Member {
    Alg,
    Kid,
    Typ,
    Crit,
    B64,
}

impl Member {
    const COUNT: usize = Member::B64 as usize + 1;

    fn from_name(name: &str) -> Option<Member> {
        Some(match name {
            "alg" => Member::Alg,
            "kid" => Member::Kid,
            "typ" => Member::Typ,
            "crit" => Member::Crit,
            "b64" => Member::B64,
            _ => return None,
        })
    }
}

/// Parses a decoded header (JSON bytes); nesting deeper than `max_depth`
/// is refused as too large.
pub fn parse(data: &[u8], max_depth: usize) -> Result<Header> {
    let mut jiter = Jiter::new(data);
    let peek = jiter.peek()?;
    if peek != Peek::Object {
        return Err(malformed("header is not a JSON object"));
    }
    let mut alg: Option<Algorithm> = None;
    let mut kid = None;
    let mut typ = None;
    let mut seen = [false; Member::COUNT];
    // A set, not a list: a forged header with many members must not cost
    // quadratic time before the signature is checked.
    let mut others: HashSet<String> = HashSet::new();

    let mut name = jiter.known_object()?;
    while let Some(text) = name {
        match Member::from_name(text) {
            Some(member) => {
                if seen[member as usize] {
                    return Err(duplicate_member());
                }
                seen[member as usize] = true;
                match member {
                    Member::Alg => alg = Some(read_alg(&mut jiter)?),
                    Member::Kid => kid = Some(read_string(&mut jiter, "kid")?),
                    Member::Typ => typ = Some(read_string(&mut jiter, "typ")?),
                    Member::Crit => read_crit(&mut jiter)?,
                    Member::B64 => read_b64(&mut jiter)?,
                }
            }
            None => {
                if !others.insert(text.to_owned()) {
                    return Err(duplicate_member());
                }
                // Other members are validated (duplicates, depth) and dropped.
                let peek = jiter.peek()?;
                value(&mut jiter, peek, &mut SkipBuilder::strict(), 1, max_depth)?;
            }
        }
        name = jiter.next_key()?;
    }
    jiter.finish()?;
    let alg = alg.ok_or(Error::new(ErrorKind::Algorithm, "header has no alg"))?;
    Ok(Header { alg, kid, typ })
}

fn read_string(jiter: &mut Jiter<'_>, what: &'static str) -> Result<String> {
    let peek = jiter.peek()?;
    if peek != Peek::String {
        return Err(Error::with(
            ErrorKind::Malformed,
            format!("header {what} is not a string"),
        ));
    }
    Ok(jiter.known_str()?.to_owned())
}

fn read_alg(jiter: &mut Jiter<'_>) -> Result<Algorithm> {
    let peek = jiter.peek()?;
    if peek != Peek::String {
        return Err(Error::new(
            ErrorKind::Algorithm,
            "header alg is not a string",
        ));
    }
    let name = jiter.known_str()?;
    // The name is the token's own text: context only (capped), never in
    // the message.
    Algorithm::from_name(name.as_bytes()).ok_or_else(|| {
        let err = if name.eq_ignore_ascii_case("none") {
            Error::new(
                ErrorKind::Algorithm,
                "unsecured tokens (alg none) are refused",
            )
        } else {
            Error::new(
                ErrorKind::Algorithm,
                "header alg is not a supported algorithm",
            )
        };
        err.detail("algorithm", Detail::Text(capped(name)))
    })
}

/// `crit` lists extensions the verifier must understand; it understands none.
fn read_crit(jiter: &mut Jiter<'_>) -> Result<()> {
    let peek = jiter.peek()?;
    if peek != Peek::Array {
        return Err(malformed("header crit is not an array"));
    }
    let first = jiter.known_array()?;
    match first {
        None => Err(malformed("header crit is empty")),
        Some(Peek::String) => Err(Error::new(
            ErrorKind::Unsupported,
            "header crit names an extension this verifier does not implement",
        )),
        Some(_) => Err(malformed("header crit holds a non-string")),
    }
}

/// `b64: false` (RFC 7797) changes what is signed; it is refused.
fn read_b64(jiter: &mut Jiter<'_>) -> Result<()> {
    let peek = jiter.peek()?;
    match peek {
        Peek::True => {
            jiter.known_bool(peek)?;
            Ok(())
        }
        Peek::False => Err(Error::new(
            ErrorKind::Unsupported,
            "unencoded payloads (b64: false) are refused",
        )),
        _ => Err(malformed("header b64 is not a boolean")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(data: &str) -> ErrorKind {
        parse(data.as_bytes(), 64).unwrap_err().kind()
    }

    #[test]
    fn reads_alg_kid_typ() {
        let h = parse(
            br#"{"alg":"RS256","typ":"JWT","kid":"k1","x5u":"https://x"}"#,
            64,
        )
        .unwrap();
        assert_eq!(h.alg, Algorithm::RS256);
        assert_eq!(h.kid.as_deref(), Some("k1"));
        assert_eq!(h.typ.as_deref(), Some("JWT"));
    }

    #[test]
    fn alg_rules() {
        assert_eq!(kind(r#"{"typ":"JWT"}"#), ErrorKind::Algorithm);
        assert_eq!(kind(r#"{"alg":"none"}"#), ErrorKind::Algorithm);
        assert_eq!(kind(r#"{"alg":"NONE"}"#), ErrorKind::Algorithm);
        assert_eq!(kind(r#"{"alg":"hs256"}"#), ErrorKind::Algorithm);
        assert_eq!(kind(r#"{"alg":null}"#), ErrorKind::Algorithm);
        assert_eq!(kind(r#"{"alg":["HS256"]}"#), ErrorKind::Algorithm);
    }

    #[test]
    fn crit_and_b64() {
        assert_eq!(
            kind(r#"{"alg":"HS256","crit":["exp"]}"#),
            ErrorKind::Unsupported
        );
        assert_eq!(kind(r#"{"alg":"HS256","crit":[]}"#), ErrorKind::Malformed);
        assert_eq!(
            kind(r#"{"alg":"HS256","crit":"b64"}"#),
            ErrorKind::Malformed
        );
        assert_eq!(kind(r#"{"alg":"HS256","crit":[1]}"#), ErrorKind::Malformed);
        assert_eq!(
            kind(r#"{"alg":"HS256","b64":false}"#),
            ErrorKind::Unsupported
        );
        assert_eq!(kind(r#"{"alg":"HS256","b64":"no"}"#), ErrorKind::Malformed);
        assert!(parse(br#"{"alg":"HS256","b64":true}"#, 64).is_ok());
    }

    #[test]
    fn duplicates_and_shapes() {
        assert_eq!(
            kind(r#"{"alg":"HS256","alg":"HS256"}"#),
            ErrorKind::Malformed
        );
        assert_eq!(kind(r#"{"alg":"HS256","x":1,"x":2}"#), ErrorKind::Malformed);
        assert_eq!(kind(r#"{"alg":"HS256","kid":1}"#), ErrorKind::Malformed);
        assert_eq!(kind(r#"["alg"]"#), ErrorKind::Malformed);
        assert_eq!(kind(r#"{"alg":"HS256"}x"#), ErrorKind::Malformed);
        assert_eq!(
            kind(r#"{"alg":"HS256","x":{"y":{"z":1,"z":2}}}"#),
            ErrorKind::Malformed
        );
        let deep = format!(
            r#"{{"alg":"HS256","x":{}{}}}"#,
            "[".repeat(70),
            "]".repeat(70)
        );
        assert_eq!(kind(&deep), ErrorKind::TooLarge);
    }
}
