//! Claim names that recur from token to token, each numbered once.
//!
//! The payload walk looks every top-level member name up here once: the
//! number tells the walk which registered claim it is (the first seven,
//! in the order of [`REGISTERED`]) and tells a builder which of its
//! prepared name objects to hand out (the Python builder keeps these names
//! interned, so a payload's keys cost a reference each, with their hash
//! already known to the dict).

use crate::policy::REGISTERED;

/// The number of `azp` (the policy may check it).
pub(crate) const AZP: usize = position("azp");

const fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The number of `name` in [`COMMON`] (evaluated at compile time).
const fn position(name: &str) -> usize {
    let mut i = 0;
    while i < COMMON.len() {
        if same(COMMON[i].as_bytes(), name.as_bytes()) {
            return i;
        }
        i += 1;
    }
    panic!("not a common claim name")
}

const _: () = {
    let mut i = 0;
    while i < REGISTERED.len() {
        assert!(
            position(REGISTERED[i]) == i,
            "COMMON must start with REGISTERED"
        );
        i += 1;
    }
};

/// Defines [`COMMON`] and [`common`] from one list.
macro_rules! common_names {
    ($($name:literal),* $(,)?) => {
        /// The common claim names; the first seven are [`REGISTERED`].
        pub(crate) const COMMON: [&str; [$($name),*].len()] = [$($name),*];

        /// The number of `name` in [`COMMON`], if it is there.
        pub(crate) fn common(name: &str) -> Option<usize> {
            match name {
                $($name => Some(const { position($name) }),)*
                _ => None,
            }
        }
    };
}

common_names!(
    "exp",
    "nbf",
    "iat",
    "iss",
    "aud",
    "sub",
    "jti",
    "scope",
    "scp",
    "azp",
    "client_id",
    "email",
    "email_verified",
    "name",
    "given_name",
    "family_name",
    "preferred_username",
    "roles",
    "groups",
    "permissions",
    "sid",
    "auth_time",
    "nonce",
    "acr",
    "amr",
    "at_hash",
    "typ",
    "tid",
    "oid",
    "org_id",
    "ver",
    "cnf",
    "act",
    "may_act",
    "entitlements",
    "locale",
    "zoneinfo",
    "picture",
    "updated_at",
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_common_name_is_found_and_nothing_else() {
        for (index, name) in COMMON.iter().enumerate() {
            assert_eq!(common(name), Some(index), "{name}");
            assert_eq!(common(&name.to_uppercase()), None);
            assert_eq!(common(&format!("{name}x")), None);
            assert_eq!(common(&name[..name.len() - 1]), None);
        }
        assert_eq!(COMMON[AZP], "azp");
        for other in [
            "",
            "a",
            "ex",
            "expx",
            "x_custom",
            "https://example.com/claims/role",
        ] {
            assert_eq!(common(other), None, "{other}");
        }
    }
}
