//! JWK parsing (RFC 7517, RFC 7518 §6, RFC 8037): one JSON object into a
//! [`Key`], under the rules of [`super::rules`].

use super::rules;
use super::{Curve, Key, KeyType};
use crate::algorithm::Algorithm;
use crate::der;
use crate::error::{invalid_key, Error, ErrorKind, Result};
use crate::json::Value;
use crate::token;

impl Key {
    /// One JWK (RFC 7517). `algorithm` must agree with the JWK's own `alg`
    /// when both are given; without either, RSA keys default to RS256 and
    /// EC/OKP keys follow their curve. Symmetric (`oct`) keys need
    /// `allow_symmetric`.
    pub fn jwk(jwk: &Value, algorithm: Option<Algorithm>, allow_symmetric: bool) -> Result<Key> {
        let Value::Object(_) = jwk else {
            return Err(invalid_key("a JWK must be a JSON object"));
        };
        let text = |name: &'static str| -> Result<Option<&str>> {
            match jwk.get(name) {
                None => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.as_str())),
                Some(_) => Err(Error::with(
                    ErrorKind::InvalidKey,
                    format!("JWK member {name} is not a string"),
                )),
            }
        };
        let required = |name: &'static str| -> Result<Vec<u8>> {
            let value = text(name)?.ok_or_else(|| {
                Error::with(
                    ErrorKind::InvalidKey,
                    format!("JWK member {name} is missing"),
                )
            })?;
            token::decode(value.as_bytes()).map_err(|_| {
                Error::with(
                    ErrorKind::InvalidKey,
                    format!("JWK member {name} is not valid base64url"),
                )
            })
        };

        let kty_name = text("kty")?.ok_or_else(|| invalid_key("JWK has no kty"))?;
        let kty = KeyType::from_jwk(kty_name);
        rules::check_jwk_members(jwk, kty, text("use")?)?;
        let kid = text("kid")?.map(str::to_owned);
        let chosen = rules::check_jwk_alg(algorithm, text("alg")?)?;

        match kty {
            Some(KeyType::Rsa) => {
                let algorithm = chosen.unwrap_or(Algorithm::RS256);
                let n = required("n")?;
                let e = required("e")?;
                Key::rsa_pkcs1(&der::rsa_public_key(&n, &e), algorithm, kid)
            }
            Some(kty @ (KeyType::Ec | KeyType::Okp)) => {
                let crv = text("crv")?.ok_or_else(|| invalid_key("JWK has no crv"))?;
                let (curve, algorithm) = rules::check_jwk_curve(kty, crv, chosen)?;
                let x = required("x")?;
                if curve == Curve::Ed25519 {
                    rules::check_coordinates(curve, &x, None)?;
                    return Key::public(&x, algorithm, kid, KeyType::Okp);
                }
                let y = required("y")?;
                rules::check_coordinates(curve, &x, Some(&y))?;
                let mut point = Vec::with_capacity(1 + 2 * curve.coordinate_len());
                point.push(0x04);
                point.extend_from_slice(&x);
                point.extend_from_slice(&y);
                Key::public(&point, algorithm, kid, KeyType::Ec)
            }
            Some(KeyType::Oct) => {
                if !allow_symmetric {
                    return Err(invalid_key(
                        "symmetric (oct) JWKs are refused unless explicitly allowed",
                    ));
                }
                let algorithm = chosen.ok_or_else(|| {
                    invalid_key("an oct JWK needs an alg (HS256, HS384 or HS512)")
                })?;
                let k = required("k")?;
                Key::secret(&k, algorithm, kid)
            }
            Some(KeyType::Akp) => {
                let algorithm = rules::check_akp_alg(text("alg")?, chosen)?;
                let public = required("pub")?;
                rules::check_mldsa_public(&public, algorithm)?;
                Key::public(&public, algorithm, kid, KeyType::Akp)
            }
            None => Err(invalid_key("JWK kty is not supported")),
        }
    }

    /// Parses one JWK from JSON text.
    pub fn jwk_json(
        data: &[u8],
        algorithm: Option<Algorithm>,
        allow_symmetric: bool,
    ) -> Result<Key> {
        let value = Value::parse(data, 16).map_err(|_| invalid_key("JWK is not valid JSON"))?;
        Key::jwk(&value, algorithm, allow_symmetric)
    }
}
