//! What a token must satisfy beyond its signature, validated once.

use crate::algorithm::{Algorithm, AlgorithmSet};
use crate::error::{Error, ErrorKind, Result};

/// Default cap on the token length in bytes.
pub const DEFAULT_MAX_TOKEN_SIZE: usize = 8 * 1024;
/// Default cap on JSON nesting depth.
pub const DEFAULT_MAX_DEPTH: usize = 64;

/// Default allowance, in seconds, for a token whose `nbf` or `iat` is ahead
/// of this server's clock (Envoy's `jwt_authn` allows 60 s of skew): a token
/// minted a moment ago by an issuer whose clock runs a little fast is
/// accepted, while `exp` keeps exactly the configured `leeway`.
pub const DEFAULT_LEEWAY_AHEAD: f64 = 60.0;

/// Registered claims that can be listed as required.
pub(crate) const REGISTERED: [&str; 7] = ["exp", "nbf", "iat", "iss", "aud", "sub", "jti"];

/// The allowed range of one numeric option.
struct Limit {
    field: &'static str,
    min: f64,
    /// Whether `min` itself is allowed (`max` always is).
    min_allowed: bool,
    max: f64,
    /// How the message describes an allowed value.
    expected: &'static str,
}

/// The one table of numeric limits: every range an option has is here, and
/// nowhere else (the Python config only checks types). A refusal names the
/// field and the range, never the value given.
const LIMITS: [Limit; 5] = [
    Limit {
        field: "leeway",
        min: 0.0,
        min_allowed: true,
        max: 3600.0,
        expected: "a finite number of seconds between 0 and 3600",
    },
    Limit {
        field: "leeway_ahead",
        min: 0.0,
        min_allowed: true,
        max: 3600.0,
        expected: "a finite number of seconds between 0 and 3600",
    },
    Limit {
        field: "max_age",
        min: 0.0,
        min_allowed: false,
        max: f64::MAX,
        expected: "a positive finite number of seconds",
    },
    Limit {
        field: "max_token_size",
        min: 16.0,
        min_allowed: true,
        max: (1 << 20) as f64,
        expected: "between 16 and 1048576 bytes",
    },
    Limit {
        field: "max_depth",
        min: 2.0,
        min_allowed: true,
        max: 512.0,
        expected: "between 2 and 512",
    },
];

/// Checks `value` against the `field` row of [`LIMITS`] (a NaN fails).
fn within(field: &str, value: f64) -> Result<()> {
    let limit = LIMITS
        .iter()
        .find(|limit| limit.field == field)
        .expect("every ranged option has a row in LIMITS");
    let above_min = if limit.min_allowed {
        value >= limit.min
    } else {
        value > limit.min
    };
    if above_min && value <= limit.max {
        Ok(())
    } else {
        Err(config(format!("{field} must be {}", limit.expected)))
    }
}

/// A validated verification policy.
#[derive(Clone, Debug)]
pub struct Policy {
    pub(crate) audiences: Vec<String>,
    pub(crate) issuers: Vec<String>,
    /// Accepted authorized parties (`azp`, OIDC Core §2); empty: not checked.
    pub(crate) azp: Vec<String>,
    /// `None`: the algorithms of the configured keys.
    pub(crate) algorithms: Option<AlgorithmSet>,
    /// Tolerance on `exp` and `max_age` (this server's clock ahead of the
    /// issuer's), and the least tolerance on `nbf` and `iat`.
    pub(crate) leeway: f64,
    /// Tolerance on `nbf` and `iat` (the issuer's clock ahead of this
    /// server's): the larger of `leeway` and `leeway_ahead`, fixed here once.
    pub(crate) ahead: f64,
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
///
/// With the `python` feature this is also the keyword list of the Python
/// `Policy(...)`: the defaults below become a dict, the caller's keywords
/// update it, and the dict is read back (an unknown keyword is refused). A
/// new option is a field here, its check in [`Policy::new`], and its field
/// in the Python config.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "python", derive(pyo3::FromPyObject, pyo3::IntoPyObject))]
#[cfg_attr(feature = "python", pyo3(from_item_all))]
pub struct PolicyOptions {
    #[cfg_attr(feature = "python", pyo3(item("audience")))]
    pub audiences: Vec<String>,
    #[cfg_attr(feature = "python", pyo3(item("issuer")))]
    pub issuers: Vec<String>,
    pub azp: Vec<String>,
    pub algorithms: Option<Vec<String>>,
    pub leeway: f64,
    pub leeway_ahead: f64,
    pub required: Vec<String>,
    pub typ: Option<String>,
    pub max_age: Option<f64>,
    #[cfg_attr(
        feature = "python",
        pyo3(from_py_with = saturating_usize)
    )]
    pub max_token_size: usize,
    #[cfg_attr(
        feature = "python",
        pyo3(from_py_with = saturating_usize)
    )]
    pub max_depth: usize,
}

impl Default for PolicyOptions {
    fn default() -> Self {
        PolicyOptions {
            audiences: Vec::new(),
            issuers: Vec::new(),
            azp: Vec::new(),
            algorithms: None,
            leeway: 0.0,
            leeway_ahead: DEFAULT_LEEWAY_AHEAD,
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

/// An allowed algorithm name; a refusal names the field, and the right
/// spelling when only the case is wrong (never the name given: a secret
/// passed in its place by mistake must not reach a message or a log).
fn parse_algorithm(name: &str) -> Result<Algorithm> {
    Algorithm::from_name(name.as_bytes()).ok_or_else(|| {
        let hint = Algorithm::ALL
            .iter()
            .find(|known| known.name().eq_ignore_ascii_case(name))
            .map(|known| {
                format!(
                    " (names are case-sensitive; did you mean {}?)",
                    known.name()
                )
            })
            .unwrap_or_default();
        config(format!(
            "algorithms holds an unknown or unsupported algorithm{hint}; expected {}",
            Algorithm::ALL.map(Algorithm::name).join(", ")
        ))
    })
}

/// A Python int as a `usize` for a ranged option: out-of-range values
/// saturate, so the range check of [`LIMITS`] refuses them by name.
#[cfg(feature = "python")]
fn saturating_usize(value: &pyo3::Bound<'_, pyo3::PyAny>) -> pyo3::PyResult<usize> {
    use pyo3::types::{PyAnyMethods, PyInt};
    match value.extract::<usize>() {
        Ok(number) => Ok(number),
        Err(err) if !value.is_instance_of::<PyInt>() => Err(err),
        Err(_) => Ok(if value.lt(0)? { 0 } else { usize::MAX }),
    }
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
            ("azp", &options.azp),
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
                Some(
                    names
                        .iter()
                        .map(|name| parse_algorithm(name))
                        .collect::<Result<AlgorithmSet>>()?,
                )
            }
        };
        within("leeway", options.leeway)?;
        within("leeway_ahead", options.leeway_ahead)?;
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
            within("max_age", age)?;
            required_registered |= 1 << 2; // a maximum age needs iat
        }
        if let Some(typ) = &options.typ {
            if typ.is_empty() {
                return Err(config("typ must be a non-empty string".to_owned()));
            }
        }
        within("max_token_size", options.max_token_size as f64)?;
        within("max_depth", options.max_depth as f64)?;
        Ok(Policy {
            audiences: options.audiences,
            issuers: options.issuers,
            azp: options.azp,
            algorithms,
            leeway: options.leeway,
            ahead: options.leeway.max(options.leeway_ahead),
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

    /// The tolerance applied to `nbf` and `iat` ahead of `now`: the larger
    /// of `leeway` and `leeway_ahead`.
    pub fn leeway_ahead(&self) -> f64 {
        self.ahead
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
mod tests;
