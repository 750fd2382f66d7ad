//! Payload decoding with the registered-claim checks done in the same pass.
//!
//! The payload is walked once: every member is handed to the [`Builder`],
//! and the registered claims (`exp`, `nbf`, `iat`, `iss`, `aud`, `sub`,
//! `jti`) are type-checked and captured on the way. The policy is applied
//! when the walk ends, against the `now` the caller passes in.

use jiter::{Jiter, NumberAny, NumberInt, Peek};

use crate::error::{capped, malformed, Detail, Error, ErrorKind, Result};
use crate::json::{duplicate_member, value, Builder, Items, NON_FINITE};
use crate::policy::{Policy, REGISTERED};

pub(crate) mod names;

/// A registered claim (RFC 7519 §4.1) the walk checks; its discriminant
/// is its index in [`REGISTERED`] and its bit in the policy's required set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Claim {
    Exp = 0,
    Nbf = 1,
    Iat = 2,
    Iss = 3,
    Aud = 4,
    Sub = 5,
    Jti = 6,
}

impl Claim {
    const ALL: [Claim; 7] = [
        Claim::Exp,
        Claim::Nbf,
        Claim::Iat,
        Claim::Iss,
        Claim::Aud,
        Claim::Sub,
        Claim::Jti,
    ];

    /// The registered claim numbered `common` in [`names::COMMON`], if any.
    fn from_common(common: usize) -> Option<Claim> {
        Claim::ALL.get(common).copied()
    }

    #[cfg(test)]
    fn from_name(name: &str) -> Option<Claim> {
        names::common(name).and_then(Claim::from_common)
    }

    const fn name(self) -> &'static str {
        REGISTERED[self as usize]
    }

    const fn bit(self) -> u8 {
        1 << self as u8
    }
}

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
#[cold]
fn invalid(name: &str, expected: &str) -> Error {
    Error::with(
        ErrorKind::InvalidClaim,
        format!("claim {name} must be {expected}"),
    )
    .detail("claim", Detail::Text(name.to_owned()))
}

/// A required claim is absent (`name` comes from the policy).
#[cold]
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
    let peek = jiter.peek()?;
    if !peek.is_num() {
        return Err(invalid(name, "a number"));
    }
    // A time beyond the range of a double would become an infinity (a token
    // that never expires): refused, whether written as a float or an integer.
    match jiter.known_number(peek)? {
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
    let peek = jiter.peek()?;
    if peek != Peek::String {
        return Err(invalid(name, "a string"));
    }
    Ok(jiter.known_str()?)
}

fn audience_value<B: Builder>(
    jiter: &mut Jiter<'_>,
    builder: &mut B,
    policy: &Policy,
) -> Result<(B::Value, bool)> {
    let peek = jiter.peek()?;
    let build = |builder: &mut B, text: &str| -> Result<(B::Value, bool)> {
        match policy.audiences.iter().position(|a| a == text) {
            Some(index) => Ok((builder.known(false, index, text)?, true)),
            None => Ok((builder.string(text)?, false)),
        }
    };
    match peek {
        Peek::String => {
            let text = jiter.known_str()?;
            build(builder, text)
        }
        Peek::Array => {
            let mut ok = false;
            let mut items = Items::new();
            let mut next = jiter.known_array()?;
            while let Some(peek) = next {
                if peek != Peek::String {
                    return Err(invalid("aud", "a string or an array of strings"));
                }
                let text = jiter.known_str()?;
                let (item, matched) = build(builder, text)?;
                ok |= matched;
                items.push(item);
                next = jiter.array_step()?;
            }
            Ok((builder.array(items)?, ok))
        }
        _ => Err(invalid("aud", "a string or an array of strings")),
    }
}

/// Claims that passed the policy, and until when that answer holds.
#[derive(Debug)]
pub struct Verified<V> {
    pub claims: V,
    /// The earliest of `exp` and, under `max_age`, `iat + max_age` (leeway
    /// never extends it); `None` without `exp`: the answer has no end, so
    /// it is never cached. `nbf` and `iat` need no bound here: once they
    /// pass at `now` they pass at every later time, and a cache serves an
    /// answer only from the time it was stored on.
    pub valid_until: Option<f64>,
}

/// Decodes `payload` (JSON bytes) into the builder's representation and
/// applies the policy's claim rules at time `now` (seconds since the epoch).
pub fn decode<B: Builder>(
    payload: &[u8],
    policy: &Policy,
    builder: &mut B,
    now: f64,
) -> Result<Verified<B::Value>> {
    let mut jiter = Jiter::new(payload);
    let peek = jiter.peek()?;
    if peek != Peek::Object {
        return Err(malformed("payload is not a JSON object"));
    }
    let mut seen = Seen::default();
    let mut object = builder.root()?;
    let mut name = jiter.known_object()?;
    while let Some(text) = name {
        let common = names::common(text);
        let slot = common.and_then(Claim::from_common);
        let is_azp = common == Some(names::AZP) && !policy.azp.is_empty();
        if slot.is_none() && !policy.required_other.is_empty() {
            if let Some(index) = policy.required_other.iter().position(|r| r == text) {
                seen.other_present |= 1 << index;
            }
        }
        let key = builder.key(text, common)?;
        let member = match slot {
            Some(claim @ (Claim::Exp | Claim::Nbf | Claim::Iat)) => {
                let (member, time) = time_value(&mut jiter, builder, claim.name())?;
                match claim {
                    Claim::Exp => seen.exp = time,
                    Claim::Nbf => seen.nbf = time,
                    _ => seen.iat = time,
                }
                member
            }
            Some(Claim::Iss) => {
                let text = string_value(&mut jiter, "iss")?;
                match policy.issuers.iter().position(|i| i == text) {
                    Some(index) => {
                        seen.issuer_ok = true;
                        builder.known(true, index, text)?
                    }
                    None => builder.string(text)?,
                }
            }
            Some(Claim::Aud) => {
                let (member, ok) = audience_value(&mut jiter, builder, policy)?;
                seen.audience_ok = ok;
                member
            }
            Some(claim @ (Claim::Sub | Claim::Jti)) => {
                let text = string_value(&mut jiter, claim.name())?;
                builder.string(text)?
            }
            None if is_azp => {
                let text = string_value(&mut jiter, "azp")?;
                seen.azp = Some(policy.azp.iter().any(|party| party == text));
                builder.string(text)?
            }
            None => {
                let peek = jiter.peek()?;
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
        if let Some(claim) = slot {
            seen.present |= claim.bit();
        }
        if !builder.insert(&mut object, key, member)? {
            return Err(duplicate_member());
        }
        name = jiter.next_key()?;
    }
    jiter.finish()?;
    check(policy, &seen, now).map_err(|err| with_seen(err, payload, policy.max_depth))?;
    Ok(Verified {
        claims: builder.finish_root(object)?,
        valid_until: valid_until(policy, &seen),
    })
}

/// Until when claims that passed [`check`] keep passing it, leeway aside:
/// `exp`, and under `max_age` (which requires `iat`) `iat + max_age`.
fn valid_until(policy: &Policy, seen: &Seen) -> Option<f64> {
    if seen.present & Claim::Exp.bit() == 0 {
        return None;
    }
    Some(match policy.max_age {
        Some(max_age) => seen.exp.min(seen.iat + max_age),
        None => seen.exp,
    })
}

/// Most values of a token's `aud` kept as context of a refusal.
const MAX_SEEN: usize = 8;

/// An issuer or audience refusal gets what the token said (`seen`: its
/// `iss`, or its `aud` values, each capped, at most [`MAX_SEEN`]), so the
/// message can show it beside what was expected. Read again from the
/// payload on the error path only: accepted tokens pay nothing.
#[cold]
fn with_seen(err: Error, payload: &[u8], max_depth: usize) -> Error {
    let claim = match err.kind() {
        ErrorKind::Issuer => "iss",
        ErrorKind::Audience => "aud",
        _ => return err,
    };
    let Ok(root) = crate::json::Value::parse(payload, max_depth) else {
        return err;
    };
    let values: Vec<String> = match root.get(claim) {
        Some(crate::json::Value::String(text)) => vec![capped(text)],
        Some(crate::json::Value::Array(items)) => items
            .iter()
            .filter_map(crate::json::Value::as_str)
            .take(MAX_SEEN)
            .map(capped)
            .collect(),
        _ => return err,
    };
    err.detail("seen", Detail::Texts(values))
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
        return Err(missing_claim(Claim::ALL[index].name()));
    }
    for (index, name) in policy.required_other.iter().enumerate() {
        if seen.other_present & (1 << index) == 0 {
            return Err(missing_claim(name));
        }
    }
    // `leeway` covers this server's clock running ahead of the issuer's
    // (`exp`, `max_age`); `ahead` the issuer's running ahead of this
    // server's (`nbf`, `iat`): a fresh token is not refused for a few
    // seconds of skew while `exp` stays exactly as configured.
    let leeway = policy.leeway;
    let ahead = policy.ahead;
    let has = |claim: Claim| seen.present & claim.bit() != 0;
    // Each rule is written as the condition that must hold, so a NaN time
    // (an integer too large to convert) fails it instead of passing.
    let before_exp = now < seen.exp + leeway;
    let after_nbf = now >= seen.nbf - ahead;
    let iat_past = seen.iat <= now + ahead;
    if has(Claim::Exp) && !before_exp {
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
    if has(Claim::Nbf) && !after_nbf {
        return Err(Error::with(
            ErrorKind::NotYetValid,
            format!(
                "token is not valid before {} (now {}, leeway ahead {}s)",
                show(seen.nbf),
                show(now),
                show(ahead)
            ),
        )
        .detail("nbf", Detail::Number(seen.nbf))
        .detail("now", Detail::Number(now))
        .detail("leeway", Detail::Number(ahead)));
    }
    if has(Claim::Iat) {
        if !iat_past {
            return Err(Error::with(
                ErrorKind::IssuedInFuture,
                format!(
                    "token was issued in the future at {} (now {}, leeway ahead {}s)",
                    show(seen.iat),
                    show(now),
                    show(ahead)
                ),
            )
            .detail("iat", Detail::Number(seen.iat))
            .detail("now", Detail::Number(now))
            .detail("leeway", Detail::Number(ahead)));
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
        if !has(Claim::Iss) {
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
        if has(Claim::Aud) {
            return Err(Error::new(
                ErrorKind::Audience,
                "token has an aud claim but no audience is configured",
            )
            .detail("expected", Detail::Texts(Vec::new())));
        }
    } else {
        if !has(Claim::Aud) {
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
mod tests;
