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
    /// when both are given. Without either, the key is bound to its key
    /// type's family ([`Key::algorithms`]): RSA keys to RS256/384/512 and
    /// PS256/384/512, `oct` keys to the HS* their length allows (a
    /// verifier's `algorithms` choose within it; without them RS256 or
    /// HS256), EC/OKP keys to their curve's one algorithm. Symmetric
    /// (`oct`) keys need `allow_symmetric`. EC coordinates shorter than the
    /// curve size are left-padded ([`Key::padded`]).
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
                let n = required("n")?;
                let e = required("e")?;
                let pkcs1 = der::rsa_public_key(&n, &e);
                match chosen {
                    Some(algorithm) => Key::rsa_pkcs1(&pkcs1, algorithm, kid),
                    None => Key::rsa_family(&pkcs1, kid),
                }
            }
            Some(kty @ (KeyType::Ec | KeyType::Okp)) => {
                let crv = text("crv")?.ok_or_else(|| invalid_key("JWK has no crv"))?;
                let (curve, algorithm) = rules::check_jwk_curve(kty, crv, chosen)?;
                let x = required("x")?;
                if curve == Curve::Ed25519 {
                    rules::check_okp(&x)?;
                    return Key::public(&x, algorithm, kid, KeyType::Okp);
                }
                let y = required("y")?;
                let (point, padded) = rules::ec_point(curve, &x, &y)?;
                let mut key = Key::public(&point, algorithm, kid, KeyType::Ec)?;
                key.padded = padded;
                Ok(key)
            }
            Some(KeyType::Oct) => {
                if !allow_symmetric {
                    return Err(invalid_key(
                        "symmetric (oct) JWKs are refused unless explicitly allowed",
                    ));
                }
                let k = required("k")?;
                match chosen {
                    Some(algorithm) => Key::secret(&k, algorithm, kid),
                    None => Key::secret_family(&k, kid),
                }
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

    /// Whether a JWK holds private key material, which [`Key::jwk`]
    /// refuses: the key set names such a skip apart (a key leaked).
    pub(crate) fn jwk_holds_private_material(jwk: &Value) -> bool {
        let kty = jwk
            .get("kty")
            .and_then(Value::as_str)
            .and_then(KeyType::from_jwk);
        rules::holds_private_member(jwk, kty)
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
