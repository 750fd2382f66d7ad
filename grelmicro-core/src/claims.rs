//! Payload decoding with the registered-claim checks done in the same pass.
//!
//! The payload is walked once: every member is handed to the [`Builder`],
//! and the registered claims (`exp`, `nbf`, `iat`, `iss`, `aud`, `sub`,
//! `jti`) are type-checked and captured on the way. The policy is applied
//! when the walk ends, against the `now` the caller passes in.

use jiter::{Jiter, NumberAny, NumberInt, Peek};

use crate::error::{malformed, Detail, Error, ErrorKind, Result};
use crate::json::{duplicate_member, parse_error, value, Builder, NON_FINITE};
use crate::policy::{Policy, REGISTERED};

const EXP: usize = 0;
const NBF: usize = 1;
const IAT: usize = 2;
const ISS: usize = 3;
const AUD: usize = 4;

/// What the walk learned about the registered claims.
#[derive(Default)]
struct Seen {
    present: u8,
    other_present: u64,
    exp: f64,
    nbf: f64,
    iat: f64,
    issuer_ok: bool,
    audience_ok: bool,
    /// `azp`, when the policy names parties: `None` absent, else whether it is one.
    azp: Option<bool>,
}

/// `name` is always a registered claim name, never text from the token.
fn invalid(name: &str, expected: &str) -> Error {
    Error::with(
        ErrorKind::InvalidClaim,
        format!("claim {name} must be {expected}"),
    )
    .detail("claim", Detail::Text(name.to_owned()))
}

/// A required claim is absent (`name` comes from the policy).
fn missing_claim(name: &str) -> Error {
    Error::with(
        ErrorKind::MissingClaim,
        format!("token has no {name} claim"),
    )
    .detail("claim", Detail::Text(name.to_owned()))
}

fn time_value<B: Builder>(
    jiter: &mut Jiter<'_>,
    builder: &mut B,
    name: &str,
) -> Result<(B::Value, f64)> {
    let peek = jiter.peek().map_err(|e| parse_error(&e))?;
    if !peek.is_num() {
        return Err(invalid(name, "a number"));
    }
    // A time beyond the range of a double would become an infinity (a token
    // that never expires): refused, whether written as a float or an integer.
    match jiter.known_number(peek).map_err(|e| parse_error(&e))? {
        NumberAny::Int(NumberInt::Int(int)) => Ok((builder.int(int)?, int as f64)),
        NumberAny::Int(NumberInt::BigInt(big)) => {
            let approx = big.to_string().parse::<f64>().unwrap_or(f64::NAN);
            if !approx.is_finite() {
                return Err(invalid(name, "a finite number"));
            }
            Ok((builder.big_int(&big)?, approx))
        }
        NumberAny::Float(float) if float.is_finite() => Ok((builder.float(float)?, float)),
        NumberAny::Float(_) => Err(invalid(name, "a finite number")),
    }
}

fn string_value<'j>(jiter: &'j mut Jiter<'_>, name: &str) -> Result<&'j str> {
    let peek = jiter.peek().map_err(|e| parse_error(&e))?;
    if peek != Peek::String {
        return Err(invalid(name, "a string"));
    }
    jiter.known_str().map_err(|e| parse_error(&e))
}

fn audience_value<B: Builder>(
    jiter: &mut Jiter<'_>,
    builder: &mut B,
    policy: &Policy,
) -> Result<(B::Value, bool)> {
    let peek = jiter.peek().map_err(|e| parse_error(&e))?;
    let build = |builder: &mut B, text: &str| -> Result<(B::Value, bool)> {
        match policy.audiences.iter().position(|a| a == text) {
            Some(index) => Ok((builder.known(false, index, text)?, true)),
            None => Ok((builder.string(text)?, false)),
        }
    };
    match peek {
        Peek::String => {
            let text = jiter.known_str().map_err(|e| parse_error(&e))?;
            build(builder, text)
        }
        Peek::Array => {
            let mut ok = false;
            let mut items = Vec::new();
            let mut next = jiter.known_array().map_err(|e| parse_error(&e))?;
            while let Some(peek) = next {
                if peek != Peek::String {
                    return Err(invalid("aud", "a string or an array of strings"));
                }
                let text = jiter.known_str().map_err(|e| parse_error(&e))?;
                let (item, matched) = build(builder, text)?;
                ok |= matched;
                items.push(item);
                next = jiter.array_step().map_err(|e| parse_error(&e))?;
            }
            Ok((builder.array(items)?, ok))
        }
        _ => Err(invalid("aud", "a string or an array of strings")),
    }
}

/// Decodes `payload` (JSON bytes) into the builder's representation and
/// applies the policy's claim rules at time `now` (seconds since the epoch).
pub fn decode<B: Builder>(
    payload: &[u8],
    policy: &Policy,
    builder: &mut B,
    now: f64,
) -> Result<B::Value> {
    let mut jiter = Jiter::new(payload);
    let peek = jiter.peek().map_err(|e| parse_error(&e))?;
    if peek != Peek::Object {
        return Err(malformed("payload is not a JSON object"));
    }
    let mut seen = Seen::default();
    let mut object = builder.object()?;
    let mut name = jiter.known_object().map_err(|e| parse_error(&e))?;
    while let Some(text) = name {
        let slot = REGISTERED.iter().position(|r| *r == text);
        let is_azp = slot.is_none() && !policy.azp.is_empty() && text == "azp";
        if slot.is_none() && !policy.required_other.is_empty() {
            if let Some(index) = policy.required_other.iter().position(|r| r == text) {
                seen.other_present |= 1 << index;
            }
        }
        let key = builder.key(text)?;
        let member = match slot {
            Some(index @ (EXP | NBF | IAT)) => {
                let (member, time) = time_value(&mut jiter, builder, REGISTERED[index])?;
                match index {
                    EXP => seen.exp = time,
                    NBF => seen.nbf = time,
                    _ => seen.iat = time,
                }
                member
            }
            Some(ISS) => {
                let text = string_value(&mut jiter, "iss")?;
                match policy.issuers.iter().position(|i| i == text) {
                    Some(index) => {
                        seen.issuer_ok = true;
                        builder.known(true, index, text)?
                    }
                    None => builder.string(text)?,
                }
            }
            Some(AUD) => {
                let (member, ok) = audience_value(&mut jiter, builder, policy)?;
                seen.audience_ok = ok;
                member
            }
            Some(index) => {
                let text = string_value(&mut jiter, REGISTERED[index])?;
                builder.string(text)?
            }
            None if is_azp => {
                let text = string_value(&mut jiter, "azp")?;
                seen.azp = Some(policy.azp.iter().any(|party| party == text));
                builder.string(text)?
            }
            None => {
                let peek = jiter.peek().map_err(|e| parse_error(&e))?;
                value(&mut jiter, peek, builder, 1, policy.max_depth).map_err(|err| {
                    if err == NON_FINITE {
                        Error::new(
                            ErrorKind::InvalidClaim,
                            "a claim holds a number out of range (it would not be finite)",
                        )
                    } else {
                        err
                    }
                })?
            }
        };
        if let Some(index) = slot {
            seen.present |= 1 << index;
        }
        if !builder.insert(&mut object, key, member)? {
            return Err(duplicate_member());
        }
        name = jiter.next_key().map_err(|e| parse_error(&e))?;
    }
    jiter.finish().map_err(|e| parse_error(&e))?;
    check(policy, &seen, now)?;
    builder.finish_root(object)
}

/// Formats a time for a message: integral seconds without a fraction.
fn show(time: f64) -> String {
    if time.fract() == 0.0 && time.abs() < 1e15 {
        format!("{}", time as i64)
    } else {
        format!("{time}")
    }
}

fn check(policy: &Policy, seen: &Seen, now: f64) -> Result<()> {
    let missing = policy.required_registered & !seen.present;
    if missing != 0 {
        let index = missing.trailing_zeros() as usize;
        return Err(missing_claim(REGISTERED[index]));
    }
    for (index, name) in policy.required_other.iter().enumerate() {
        if seen.other_present & (1 << index) == 0 {
            return Err(missing_claim(name));
        }
    }
    let leeway = policy.leeway;
    let has = |index: usize| seen.present & (1 << index) != 0;
    // Each rule is written as the condition that must hold, so a NaN time
    // (an integer too large to convert) fails it instead of passing.
    let before_exp = now < seen.exp + leeway;
    let after_nbf = now >= seen.nbf - leeway;
    let iat_past = seen.iat <= now + leeway;
    if has(EXP) && !before_exp {
        return Err(Error::with(
            ErrorKind::Expired,
            format!(
                "token expired at {} (now {}, leeway {}s)",
                show(seen.exp),
                show(now),
                show(leeway)
            ),
        )
        .detail("exp", Detail::Number(seen.exp))
        .detail("now", Detail::Number(now))
        .detail("leeway", Detail::Number(leeway)));
    }
    if has(NBF) && !after_nbf {
        return Err(Error::with(
            ErrorKind::NotYetValid,
            format!(
                "token is not valid before {} (now {}, leeway {}s)",
                show(seen.nbf),
                show(now),
                show(leeway)
            ),
        )
        .detail("nbf", Detail::Number(seen.nbf))
        .detail("now", Detail::Number(now))
        .detail("leeway", Detail::Number(leeway)));
    }
    if has(IAT) {
        if !iat_past {
            return Err(Error::with(
                ErrorKind::IssuedInFuture,
                format!(
                    "token was issued in the future at {} (now {}, leeway {}s)",
                    show(seen.iat),
                    show(now),
                    show(leeway)
                ),
            )
            .detail("iat", Detail::Number(seen.iat))
            .detail("now", Detail::Number(now))
            .detail("leeway", Detail::Number(leeway)));
        }
        if let Some(max_age) = policy.max_age {
            let young_enough = now - seen.iat <= max_age + leeway;
            if !young_enough {
                return Err(Error::with(
                    ErrorKind::TooOld,
                    format!(
                        "token was issued at {}, more than {}s before now {}",
                        show(seen.iat),
                        show(max_age),
                        show(now)
                    ),
                )
                .detail("iat", Detail::Number(seen.iat))
                .detail("now", Detail::Number(now))
                .detail("leeway", Detail::Number(leeway))
                .detail("max_age", Detail::Number(max_age)));
            }
        }
    }
    if !policy.issuers.is_empty() {
        if !has(ISS) {
            return Err(missing_claim("iss"));
        }
        if !seen.issuer_ok {
            return Err(
                Error::new(ErrorKind::Issuer, "token issuer is not accepted")
                    .detail("expected", Detail::Texts(policy.issuers.clone())),
            );
        }
    }
    if policy.audiences.is_empty() {
        if has(AUD) {
            return Err(Error::new(
                ErrorKind::Audience,
                "token has an aud claim but no audience is configured",
            )
            .detail("expected", Detail::Texts(Vec::new())));
        }
    } else {
        if !has(AUD) {
            return Err(missing_claim("aud"));
        }
        if !seen.audience_ok {
            return Err(
                Error::new(ErrorKind::Audience, "token audience does not match")
                    .detail("expected", Detail::Texts(policy.audiences.clone())),
            );
        }
    }
    if !policy.azp.is_empty() {
        match seen.azp {
            None => return Err(missing_claim("azp")),
            Some(false) => {
                return Err(invalid("azp", "one of the accepted authorized parties")
                    .detail("expected", Detail::Texts(policy.azp.clone())))
            }
            Some(true) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{Value, ValueBuilder};
    use crate::policy::PolicyOptions;

    fn policy(options: PolicyOptions) -> Policy {
        Policy::new(options).unwrap()
    }

    fn run(payload: &str, policy: &Policy, now: f64) -> Result<Value> {
        decode(payload.as_bytes(), policy, &mut ValueBuilder, now)
    }

    fn kind(payload: &str, policy: &Policy, now: f64) -> ErrorKind {
        run(payload, policy, now).unwrap_err().kind()
    }

    #[test]
    fn exp_boundary_is_exclusive() {
        let p = policy(PolicyOptions::default());
        assert!(run(r#"{"exp":100}"#, &p, 99.0).is_ok());
        assert_eq!(kind(r#"{"exp":100}"#, &p, 100.0), ErrorKind::Expired);
        assert!(run(r#"{"exp":100.5}"#, &p, 100.25).is_ok());
        let lenient = policy(PolicyOptions {
            leeway: 10.0,
            ..Default::default()
        });
        assert!(run(r#"{"exp":100}"#, &lenient, 109.0).is_ok());
        assert_eq!(kind(r#"{"exp":100}"#, &lenient, 110.0), ErrorKind::Expired);
    }

    #[test]
    fn nbf_and_iat_boundaries() {
        let p = policy(PolicyOptions {
            required: vec![],
            ..Default::default()
        });
        assert!(run(r#"{"nbf":100}"#, &p, 100.0).is_ok());
        assert_eq!(kind(r#"{"nbf":100}"#, &p, 99.0), ErrorKind::NotYetValid);
        assert!(run(r#"{"iat":100}"#, &p, 100.0).is_ok());
        assert_eq!(kind(r#"{"iat":101}"#, &p, 100.0), ErrorKind::IssuedInFuture);
        let aged = policy(PolicyOptions {
            required: vec![],
            max_age: Some(60.0),
            ..Default::default()
        });
        assert!(run(r#"{"iat":100}"#, &aged, 160.0).is_ok());
        assert_eq!(kind(r#"{"iat":100}"#, &aged, 160.5), ErrorKind::TooOld);
        assert_eq!(kind(r#"{}"#, &aged, 100.0), ErrorKind::MissingClaim);
    }

    #[test]
    fn times_must_be_numbers() {
        let p = policy(PolicyOptions {
            required: vec![],
            ..Default::default()
        });
        for bad in [
            r#"{"exp":"100"}"#,
            r#"{"exp":true}"#,
            r#"{"nbf":null}"#,
            r#"{"iat":[1]}"#,
            r#"{"exp":{}}"#,
        ] {
            assert_eq!(kind(bad, &p, 0.0), ErrorKind::InvalidClaim, "{bad}");
        }
        assert!(run(r#"{"exp":1e300}"#, &p, 0.0).is_ok());
        assert!(run(r#"{"exp":123456789012345678901234567890}"#, &p, 0.0).is_ok());
        // Out of a double's range: an infinite exp would never expire.
        let huge = format!(r#"{{"exp":1{}}}"#, "0".repeat(400));
        for bad in [
            r#"{"exp":1e400}"#,
            r#"{"nbf":-1e309}"#,
            r#"{"iat":1e999}"#,
            huge.as_str(),
            r#"{"x":[1,{"y":1e400}]}"#,
            r#"{"x":-1e309}"#,
        ] {
            assert_eq!(kind(bad, &p, 0.0), ErrorKind::InvalidClaim, "{bad}");
        }
    }

    #[test]
    fn audience_rules() {
        let p = policy(PolicyOptions {
            audiences: vec!["a".into(), "b".into()],
            required: vec![],
            ..Default::default()
        });
        assert!(run(r#"{"aud":"b"}"#, &p, 0.0).is_ok());
        assert!(run(r#"{"aud":["x","a"]}"#, &p, 0.0).is_ok());
        assert_eq!(kind(r#"{"aud":"A"}"#, &p, 0.0), ErrorKind::Audience);
        assert_eq!(kind(r#"{"aud":"ab"}"#, &p, 0.0), ErrorKind::Audience);
        assert_eq!(kind(r#"{"aud":[]}"#, &p, 0.0), ErrorKind::Audience);
        assert_eq!(kind(r#"{"aud":["a",1]}"#, &p, 0.0), ErrorKind::InvalidClaim);
        assert_eq!(kind(r#"{"aud":{"a":1}}"#, &p, 0.0), ErrorKind::InvalidClaim);
        assert_eq!(kind(r#"{}"#, &p, 0.0), ErrorKind::MissingClaim);
        let none = policy(PolicyOptions {
            required: vec![],
            ..Default::default()
        });
        assert_eq!(kind(r#"{"aud":"a"}"#, &none, 0.0), ErrorKind::Audience);
        assert!(run(r#"{}"#, &none, 0.0).is_ok());
    }

    #[test]
    fn issuer_rules() {
        let p = policy(PolicyOptions {
            issuers: vec!["https://i/".into()],
            required: vec![],
            ..Default::default()
        });
        assert!(run(r#"{"iss":"https://i/"}"#, &p, 0.0).is_ok());
        assert_eq!(kind(r#"{"iss":"https://i"}"#, &p, 0.0), ErrorKind::Issuer);
        assert_eq!(kind(r#"{"iss":"HTTPS://I/"}"#, &p, 0.0), ErrorKind::Issuer);
        assert_eq!(
            kind(r#"{"iss":["https://i/"]}"#, &p, 0.0),
            ErrorKind::InvalidClaim
        );
        assert_eq!(kind(r#"{}"#, &p, 0.0), ErrorKind::MissingClaim);
    }

    #[test]
    fn required_claims_and_shapes() {
        let p = policy(PolicyOptions {
            required: vec!["exp".into(), "tenant".into(), "sub".into()],
            ..Default::default()
        });
        assert!(run(r#"{"exp":10,"tenant":null,"sub":"u"}"#, &p, 0.0).is_ok());
        let err = run(r#"{"exp":10,"sub":"u"}"#, &p, 0.0).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::MissingClaim);
        assert!(err.message().contains("tenant"));
        assert_eq!(err.context(), &[("claim", Detail::Text("tenant".into()))]);
        let err = run(r#"{"exp":"10","tenant":1,"sub":"u"}"#, &p, 0.0).unwrap_err();
        assert_eq!(err.context(), &[("claim", Detail::Text("exp".into()))]);
        assert_eq!(
            kind(r#"{"exp":10,"tenant":1,"sub":5}"#, &p, 0.0),
            ErrorKind::InvalidClaim
        );
        assert_eq!(kind(r#"[1]"#, &p, 0.0), ErrorKind::Malformed);
        assert_eq!(
            kind(r#"{"exp":10,"exp":10}"#, &p, 0.0),
            ErrorKind::Malformed
        );
        assert_eq!(kind(r#"{"exp":10} {}"#, &p, 0.0), ErrorKind::Malformed);
    }

    #[test]
    fn messages_carry_times_only() {
        let p = policy(PolicyOptions::default());
        let err = run(r#"{"exp":100,"secret":"hunter2"}"#, &p, 200.0).unwrap_err();
        assert_eq!(err.message(), "token expired at 100 (now 200, leeway 0s)");
        assert_eq!(
            err.context(),
            &[
                ("exp", Detail::Number(100.0)),
                ("now", Detail::Number(200.0)),
                ("leeway", Detail::Number(0.0)),
            ]
        );
        let p = policy(PolicyOptions {
            issuers: vec!["https://i/".into()],
            required: vec![],
            ..Default::default()
        });
        let err = run(r#"{"iss":"https://evil/"}"#, &p, 0.0).unwrap_err();
        assert_eq!(
            err.context(),
            &[("expected", Detail::Texts(vec!["https://i/".into()]))]
        );
    }
}
