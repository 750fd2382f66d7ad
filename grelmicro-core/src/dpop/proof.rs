//! Checking one proof: header and key, signature, claims, binding.

use aws_lc_rs::constant_time::verify_slices_are_equal;
use aws_lc_rs::digest;

use super::{normalize_htu, thumbprint, Accepted, Check, ProofVerifier, Refusal, MAX_JTI};
use crate::algorithm::{Algorithm, Family};
use crate::error::{Error, ErrorKind};
use crate::header;
use crate::json::Value;
use crate::key::Key;
use crate::policy::normalise_typ;
use crate::token;

type Checked<T> = std::result::Result<T, Refusal>;

fn structure(err: Error) -> Refusal {
    Refusal::from(Check::Structure, err)
}

/// A string claim of the proof, `None` when absent; any other JSON type is
/// refused under `check`.
fn text_claim<'v>(claims: &'v Value, name: &'static str, check: Check) -> Checked<Option<&'v str>> {
    match claims.get(name) {
        None => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(Refusal::with(
            check,
            ErrorKind::InvalidClaim,
            format!("DPoP proof {name} is not a string"),
        )),
    }
}

/// A string claim the proof must carry.
fn required_text<'v>(claims: &'v Value, name: &'static str, check: Check) -> Checked<&'v str> {
    text_claim(claims, name, check)?.ok_or_else(|| {
        Refusal::with(
            check,
            ErrorKind::MissingClaim,
            format!("DPoP proof has no {name}"),
        )
    })
}

impl ProofVerifier {
    /// Checks one proof for a request (`method`, `uri`) that carried
    /// `access_token`, bound to the key whose thumbprint is `jkt`.
    pub fn verify(
        &self,
        proof: &[u8],
        method: &str,
        uri: &str,
        access_token: &[u8],
        jkt: &str,
        now: f64,
    ) -> Checked<Accepted> {
        if !now.is_finite() {
            return Err(Refusal::new(
                Check::IssuedAt,
                ErrorKind::InvalidConfig,
                "the time to check the proof against is not a finite number",
            ));
        }
        let segments = token::split(proof, self.max_size).map_err(structure)?;
        let header_bytes = token::decode(segments.header).map_err(structure)?;
        let (alg, header_value) = self.header(&header_bytes)?;
        // `header` refused a header without one; `Null` is never reached.
        let jwk = header_value.get("jwk").unwrap_or(&Value::Null);
        let key = Key::jwk(jwk, Some(alg), false).map_err(|err| {
            // The key's own message (private members, weak RSA, off-curve
            // point, small-order Ed25519) says nothing about its bytes.
            Refusal::with(
                Check::Key,
                ErrorKind::InvalidKey,
                format!("DPoP proof jwk: {}", err.message()),
            )
        })?;

        // The binding, before the signature: the proof key must be the key
        // the access token names. Both are public (the token's `cnf.jkt`, the
        // header's `jwk`), so checking first reveals nothing, and a proof by
        // any other key is refused for the price of a hash, not of a
        // signature check by a key the sender chose (RSA-8192 costs ~0.5 ms).
        let thumbprint = thumbprint(jwk).map_err(|err| Refusal::from(Check::Key, err))?;
        if verify_slices_are_equal(thumbprint.as_bytes(), jkt.as_bytes()).is_err() {
            return Err(Refusal::new(
                Check::Binding,
                ErrorKind::InvalidClaim,
                "the DPoP proof key is not the key the access token is bound to (cnf.jkt)",
            ));
        }

        // Signature, then the payload (read only once authenticated).
        let signature = token::decode(segments.signature).map_err(structure)?;
        let payload = token::decode(segments.payload).map_err(structure)?;
        key.verify(alg, segments.signing_input, &signature)
            .map_err(|err| Refusal::from(Check::Signature, err))?;
        let claims = Value::parse(&payload, self.max_depth).map_err(structure)?;
        if !matches!(claims, Value::Object(_)) {
            return Err(Refusal::new(
                Check::Structure,
                ErrorKind::Malformed,
                "DPoP proof payload is not a JSON object",
            ));
        }
        let (jti, iat, nonce) = self.claims(&claims, method, uri, access_token, now)?;

        let mut ctx = digest::Context::new(&digest::SHA256);
        ctx.update(thumbprint.as_bytes());
        ctx.update(&[0]);
        ctx.update(jti.as_bytes());
        let mut replay_key = [0u8; 32];
        replay_key.copy_from_slice(ctx.finish().as_ref());
        Ok(Accepted {
            replay_key,
            iat,
            nonce,
            algorithm: alg,
        })
    }

    /// The header: the same rules as a token header (alg, crit, b64,
    /// duplicates, depth), then `typ`, an allowed asymmetric `alg` and a
    /// `jwk` member. Gives the algorithm and the whole header.
    fn header(&self, header_bytes: &[u8]) -> Checked<(Algorithm, Value)> {
        let parsed = header::parse(header_bytes, self.max_depth).map_err(|err| {
            let check = if err.kind() == ErrorKind::Algorithm {
                Check::Algorithm
            } else {
                Check::Structure
            };
            Refusal::from(check, err)
        })?;
        if parsed.typ.as_deref().map(normalise_typ).as_deref() != Some("dpop+jwt") {
            return Err(Refusal::new(
                Check::Type,
                ErrorKind::Type,
                "DPoP proof typ is not dpop+jwt",
            ));
        }
        let alg = parsed.alg;
        if alg.family() == Family::Hmac {
            return Err(Refusal::new(
                Check::Algorithm,
                ErrorKind::Algorithm,
                "DPoP proofs must use a public-key algorithm, not HMAC",
            ));
        }
        if !self.allows(alg) {
            return Err(Refusal::new(
                Check::Algorithm,
                ErrorKind::Algorithm,
                "DPoP proof alg is not allowed",
            ));
        }
        let value = Value::parse(header_bytes, self.max_depth).map_err(structure)?;
        if value.get("jwk").is_none() {
            return Err(Refusal::new(
                Check::Key,
                ErrorKind::InvalidKey,
                "DPoP proof header has no jwk",
            ));
        }
        Ok((alg, value))
    }

    /// The claims, in order: `jti`, `htm`, `htu`, `iat`, `ath`, `nonce`.
    /// Gives the `jti`, the `iat` and the `nonce`.
    fn claims<'v>(
        &self,
        claims: &'v Value,
        method: &str,
        uri: &str,
        access_token: &[u8],
        now: f64,
    ) -> Checked<(&'v str, f64, Option<String>)> {
        let jti = required_text(claims, "jti", Check::Jti)?;
        if jti.is_empty() || jti.len() > MAX_JTI {
            return Err(Refusal::new(
                Check::Jti,
                ErrorKind::InvalidClaim,
                "DPoP proof jti is empty or longer than 256 bytes",
            ));
        }
        if required_text(claims, "htm", Check::Method)? != method {
            return Err(Refusal::new(
                Check::Method,
                ErrorKind::InvalidClaim,
                "DPoP proof htm is not the request method",
            ));
        }
        let htu = required_text(claims, "htu", Check::Uri)?;
        let Some(expected_uri) = normalize_htu(uri) else {
            return Err(Refusal::new(
                Check::Uri,
                ErrorKind::InvalidConfig,
                "the request URI is not an absolute http(s) URI",
            ));
        };
        if normalize_htu(htu).as_deref() != Some(expected_uri.as_str()) {
            return Err(Refusal::new(
                Check::Uri,
                ErrorKind::InvalidClaim,
                "DPoP proof htu is not the request URI",
            ));
        }
        let iat = self.check_iat(claims.get("iat"), now)?;
        let ath = text_claim(claims, "ath", Check::AccessTokenHash)?.ok_or_else(|| {
            Refusal::new(
                Check::AccessTokenHash,
                ErrorKind::MissingClaim,
                "DPoP proof has no ath (required with an access token)",
            )
        })?;
        let expected = token::encode(&crate::digest::sha256(access_token));
        if verify_slices_are_equal(ath.as_bytes(), expected.as_bytes()).is_err() {
            return Err(Refusal::new(
                Check::AccessTokenHash,
                ErrorKind::InvalidClaim,
                "DPoP proof ath is not the hash of the access token",
            ));
        }
        let nonce = text_claim(claims, "nonce", Check::Nonce)?.map(str::to_owned);
        Ok((jti, iat, nonce))
    }

    /// `now - max_age - leeway <= iat <= now + leeway`.
    fn check_iat(&self, value: Option<&Value>, now: f64) -> Checked<f64> {
        let iat = match value {
            Some(Value::Int(i)) => *i as f64,
            Some(Value::Float(f)) if f.is_finite() => *f,
            // Beyond 64 bits: no window holds it.
            Some(Value::BigInt(_)) => f64::INFINITY,
            Some(_) => {
                return Err(Refusal::new(
                    Check::IssuedAt,
                    ErrorKind::InvalidClaim,
                    "DPoP proof iat is not a number",
                ))
            }
            None => {
                return Err(Refusal::new(
                    Check::IssuedAt,
                    ErrorKind::MissingClaim,
                    "DPoP proof has no iat",
                ))
            }
        };
        if iat > now + self.leeway {
            return Err(Refusal::new(
                Check::IssuedAt,
                ErrorKind::IssuedInFuture,
                "DPoP proof iat is in the future",
            ));
        }
        if iat < now - self.max_age - self.leeway {
            return Err(Refusal::new(
                Check::IssuedAt,
                ErrorKind::TooOld,
                "DPoP proof iat is older than the acceptance window",
            ));
        }
        Ok(iat)
    }
}
