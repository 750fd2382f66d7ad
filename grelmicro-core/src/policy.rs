//! What a token must satisfy beyond its signature, validated once.

use crate::algorithm::AlgorithmSet;
use crate::error::{Error, ErrorKind, Result};

/// Default cap on the token length in bytes.
pub const DEFAULT_MAX_TOKEN_SIZE: usize = 8 * 1024;
/// Default cap on JSON nesting depth.
pub const DEFAULT_MAX_DEPTH: usize = 64;

/// Registered claims that can be listed as required.
pub(crate) const REGISTERED: [&str; 7] = ["exp", "nbf", "iat", "iss", "aud", "sub", "jti"];

/// A validated verification policy.
#[derive(Clone, Debug)]
pub struct Policy {
    pub(crate) audiences: Vec<String>,
    pub(crate) issuers: Vec<String>,
    /// `None`: the algorithms of the configured keys.
    pub(crate) algorithms: Option<AlgorithmSet>,
    pub(crate) leeway: f64,
    /// Bit `i` set when `REGISTERED[i]` is required.
    pub(crate) required_registered: u8,
    /// Required claims outside the registered set.
    pub(crate) required_other: Vec<String>,
    /// Expected `typ`, lowercased, without an `application/` prefix.
    pub(crate) typ: Option<String>,
    pub(crate) max_age: Option<f64>,
    pub(crate) max_token_size: usize,
    pub(crate) max_depth: usize,
}

/// Everything a policy can be built from.
#[derive(Clone, Debug)]
pub struct PolicyOptions {
    pub audiences: Vec<String>,
    pub issuers: Vec<String>,
    pub algorithms: Option<Vec<String>>,
    pub leeway: f64,
    pub required: Vec<String>,
    pub typ: Option<String>,
    pub max_age: Option<f64>,
    pub max_token_size: usize,
    pub max_depth: usize,
}

impl Default for PolicyOptions {
    fn default() -> Self {
        PolicyOptions {
            audiences: Vec::new(),
            issuers: Vec::new(),
            algorithms: None,
            leeway: 0.0,
            required: vec!["exp".to_owned()],
            typ: None,
            max_age: None,
            max_token_size: DEFAULT_MAX_TOKEN_SIZE,
            max_depth: DEFAULT_MAX_DEPTH,
        }
    }
}

fn config(message: String) -> Error {
    Error::with(ErrorKind::InvalidConfig, message)
}

/// Normalises a media type for `typ` comparison (RFC 7515 §4.1.9).
pub(crate) fn normalise_typ(typ: &str) -> String {
    let lower = typ.to_ascii_lowercase();
    match lower.strip_prefix("application/") {
        Some(rest) => rest.to_owned(),
        None => lower,
    }
}

impl Policy {
    pub fn new(options: PolicyOptions) -> Result<Policy> {
        for (field, values) in [
            ("audience", &options.audiences),
            ("issuer", &options.issuers),
        ] {
            if values.iter().any(String::is_empty) {
                return Err(config(format!("{field} values must be non-empty strings")));
            }
        }
        let algorithms = match &options.algorithms {
            None => None,
            Some(names) => {
                if names.is_empty() {
                    return Err(config("algorithms must not be empty".to_owned()));
                }
                Some(AlgorithmSet::parse_config(names)?)
            }
        };
        if !options.leeway.is_finite() || options.leeway < 0.0 {
            return Err(config(
                "leeway must be a finite number of seconds >= 0".to_owned(),
            ));
        }
        let mut required_registered = 0u8;
        let mut required_other = Vec::new();
        for name in &options.required {
            if name.is_empty() {
                return Err(config("required claim names must be non-empty".to_owned()));
            }
            match REGISTERED.iter().position(|r| r == name) {
                Some(index) => required_registered |= 1 << index,
                None => {
                    if !required_other.contains(name) {
                        required_other.push(name.clone());
                    }
                }
            }
        }
        if required_other.len() > 64 {
            return Err(config(
                "required lists more than 64 claims outside the registered set".to_owned(),
            ));
        }
        if let Some(age) = options.max_age {
            if !age.is_finite() || age <= 0.0 {
                return Err(config(
                    "max_age must be a positive number of seconds".to_owned(),
                ));
            }
            required_registered |= 1 << 2; // a maximum age needs iat
        }
        if let Some(typ) = &options.typ {
            if typ.is_empty() {
                return Err(config("typ must be a non-empty string".to_owned()));
            }
        }
        if !(16..=1 << 20).contains(&options.max_token_size) {
            return Err(config(
                "max_token_size must be between 16 and 1048576 bytes".to_owned(),
            ));
        }
        if !(2..=512).contains(&options.max_depth) {
            return Err(config("max_depth must be between 2 and 512".to_owned()));
        }
        Ok(Policy {
            audiences: options.audiences,
            issuers: options.issuers,
            algorithms,
            leeway: options.leeway,
            required_registered,
            required_other,
            typ: options.typ.as_deref().map(normalise_typ),
            max_age: options.max_age,
            max_token_size: options.max_token_size,
            max_depth: options.max_depth,
        })
    }

    pub fn max_token_size(&self) -> usize {
        self.max_token_size
    }

    pub fn issuers(&self) -> &[String] {
        &self.issuers
    }

    pub fn audiences(&self) -> &[String] {
        &self.audiences
    }

    pub fn leeway(&self) -> f64 {
        self.leeway
    }

    /// Checks the header `typ` against the policy.
    pub(crate) fn check_typ(&self, typ: Option<&str>) -> Result<()> {
        let Some(expected) = &self.typ else {
            return Ok(());
        };
        match typ {
            Some(found) if normalise_typ(found) == *expected => Ok(()),
            Some(_) => Err(Error::new(
                ErrorKind::Type,
                "token typ does not match the policy",
            )),
            None => Err(Error::new(
                ErrorKind::Type,
                "token has no typ and the policy requires one",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_build() {
        let policy = Policy::new(PolicyOptions::default()).unwrap();
        assert_eq!(policy.required_registered, 1);
        assert_eq!(policy.max_token_size(), 8192);
    }

    #[test]
    fn refusals_name_the_field() {
        let cases: Vec<(PolicyOptions, &str)> = vec![
            (
                PolicyOptions {
                    leeway: -1.0,
                    ..Default::default()
                },
                "leeway",
            ),
            (
                PolicyOptions {
                    leeway: f64::NAN,
                    ..Default::default()
                },
                "leeway",
            ),
            (
                PolicyOptions {
                    algorithms: Some(vec!["none".into()]),
                    ..Default::default()
                },
                "algorithm",
            ),
            (
                PolicyOptions {
                    algorithms: Some(vec![]),
                    ..Default::default()
                },
                "algorithms",
            ),
            (
                PolicyOptions {
                    audiences: vec![String::new()],
                    ..Default::default()
                },
                "audience",
            ),
            (
                PolicyOptions {
                    max_age: Some(0.0),
                    ..Default::default()
                },
                "max_age",
            ),
            (
                PolicyOptions {
                    max_token_size: 1,
                    ..Default::default()
                },
                "max_token_size",
            ),
            (
                PolicyOptions {
                    max_depth: 1,
                    ..Default::default()
                },
                "max_depth",
            ),
            (
                PolicyOptions {
                    typ: Some(String::new()),
                    ..Default::default()
                },
                "typ",
            ),
        ];
        for (options, field) in cases {
            let err = Policy::new(options).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidConfig);
            assert!(err.message().contains(field), "{}", err.message());
        }
    }

    #[test]
    fn typ_is_compared_as_a_media_type() {
        let policy = Policy::new(PolicyOptions {
            typ: Some("at+jwt".into()),
            ..Default::default()
        })
        .unwrap();
        assert!(policy.check_typ(Some("at+jwt")).is_ok());
        assert!(policy.check_typ(Some("AT+JWT")).is_ok());
        assert!(policy.check_typ(Some("application/at+JWT")).is_ok());
        assert_eq!(
            policy.check_typ(Some("JWT")).unwrap_err().kind(),
            ErrorKind::Type
        );
        assert_eq!(policy.check_typ(None).unwrap_err().kind(), ErrorKind::Type);
        let open = Policy::new(PolicyOptions::default()).unwrap();
        assert!(open.check_typ(None).is_ok());
    }
}
