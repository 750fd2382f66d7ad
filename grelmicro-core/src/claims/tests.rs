//! Tests of the one-pass payload decoding and the claim rules.

use super::*;

#[test]
fn claim_enum_follows_the_registered_list() {
    assert_eq!(Claim::ALL.len(), REGISTERED.len());
    for (index, claim) in Claim::ALL.into_iter().enumerate() {
        assert_eq!(claim as usize, index);
        assert_eq!(Claim::from_name(REGISTERED[index]), Some(claim));
        assert_eq!(claim.name(), REGISTERED[index]);
    }
    assert_eq!(Claim::from_name("EXP"), None);
}
use crate::json::{Value, ValueBuilder};
use crate::policy::PolicyOptions;

fn policy(options: PolicyOptions) -> Policy {
    Policy::new(options).unwrap()
}

fn run(payload: &str, policy: &Policy, now: f64) -> Result<Value> {
    decode(payload.as_bytes(), policy, &mut ValueBuilder, now).map(|v| v.claims)
}

fn valid_until(payload: &str, policy: &Policy, now: f64) -> Option<f64> {
    decode(payload.as_bytes(), policy, &mut ValueBuilder, now)
        .unwrap()
        .valid_until
}

#[test]
fn valid_until_is_exp_or_iat_plus_max_age_whichever_first() {
    let plain = policy(PolicyOptions::default());
    assert_eq!(valid_until(r#"{"exp":100}"#, &plain, 0.0), Some(100.0));
    assert_eq!(valid_until(r#"{"exp":100.5}"#, &plain, 0.0), Some(100.5));
    // iat alone changes nothing without max_age.
    assert_eq!(
        valid_until(r#"{"exp":100,"iat":0}"#, &plain, 0.0),
        Some(100.0)
    );
    let aged = policy(PolicyOptions {
        max_age: Some(60.0),
        ..Default::default()
    });
    assert_eq!(
        valid_until(r#"{"exp":1000,"iat":10}"#, &aged, 20.0),
        Some(70.0)
    );
    assert_eq!(
        valid_until(r#"{"exp":50,"iat":10}"#, &aged, 20.0),
        Some(50.0)
    );
    // Leeway lets a token through later; it never lengthens the answer.
    let lenient = policy(PolicyOptions {
        max_age: Some(60.0),
        leeway: 30.0,
        ..Default::default()
    });
    assert_eq!(
        valid_until(r#"{"exp":1000,"iat":10}"#, &lenient, 20.0),
        Some(70.0)
    );
    // A huge integer exp is finite (refused past a double's range).
    let huge = valid_until(r#"{"exp":1000000000000000000000000000000}"#, &plain, 0.0);
    assert_eq!(huge, Some(1e30));
}

#[test]
fn valid_until_is_none_without_exp() {
    let optional = policy(PolicyOptions {
        required: vec![],
        ..Default::default()
    });
    assert_eq!(valid_until(r#"{"sub":"x"}"#, &optional, 0.0), None);
    let aged = policy(PolicyOptions {
        required: vec![],
        max_age: Some(60.0),
        ..Default::default()
    });
    assert_eq!(valid_until(r#"{"iat":10}"#, &aged, 20.0), None);
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
        leeway_ahead: 0.0,
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
#[allow(clippy::float_cmp)] // exact values: set from literals, never computed
fn nbf_and_iat_ahead_get_the_default_allowance_exp_none() {
    let p = policy(PolicyOptions::default());
    assert_eq!(p.leeway_ahead(), 60.0);
    // nbf and iat up to 60 s ahead of now pass, exactly at the bound too.
    assert!(run(r#"{"exp":1000,"nbf":160}"#, &p, 100.0).is_ok());
    assert!(run(r#"{"exp":1000,"iat":160}"#, &p, 100.0).is_ok());
    assert!(run(r#"{"exp":1000,"nbf":160,"iat":160}"#, &p, 100.0).is_ok());
    // One second past the allowance is refused.
    assert_eq!(
        kind(r#"{"exp":1000,"nbf":161}"#, &p, 100.0),
        ErrorKind::NotYetValid
    );
    assert_eq!(
        kind(r#"{"exp":1000,"iat":161}"#, &p, 100.0),
        ErrorKind::IssuedInFuture
    );
    // exp keeps leeway 0: expired at exp exactly, allowance or not.
    assert!(run(r#"{"exp":100}"#, &p, 99.0).is_ok());
    assert_eq!(kind(r#"{"exp":100}"#, &p, 100.0), ErrorKind::Expired);
    // max_age counts back from iat with leeway only.
    let aged = policy(PolicyOptions {
        max_age: Some(60.0),
        ..Default::default()
    });
    assert!(run(r#"{"exp":1000,"iat":100}"#, &aged, 160.0).is_ok());
    assert_eq!(
        kind(r#"{"exp":1000,"iat":100}"#, &aged, 161.0),
        ErrorKind::TooOld
    );
    assert!(run(r#"{"exp":1000,"iat":160}"#, &aged, 100.0).is_ok());
}

#[test]
#[allow(clippy::float_cmp)] // exact values: the larger of two literals
fn the_allowance_ahead_is_the_larger_of_leeway_and_leeway_ahead() {
    let both = |leeway: f64, leeway_ahead: f64| {
        policy(PolicyOptions {
            leeway,
            leeway_ahead,
            ..Default::default()
        })
    };
    // leeway above leeway_ahead: leeway both ways (the rule before).
    let wide = both(300.0, 60.0);
    assert_eq!(wide.leeway_ahead(), 300.0);
    assert!(run(r#"{"exp":1000,"nbf":400}"#, &wide, 100.0).is_ok());
    assert_eq!(
        kind(r#"{"exp":1000,"nbf":401}"#, &wide, 100.0),
        ErrorKind::NotYetValid
    );
    assert!(run(r#"{"exp":100}"#, &wide, 399.0).is_ok());
    assert_eq!(kind(r#"{"exp":100}"#, &wide, 400.0), ErrorKind::Expired);
    // leeway_ahead above leeway: ahead only, exp keeps leeway.
    let ahead = both(5.0, 120.0);
    assert!(run(r#"{"exp":1000,"iat":220}"#, &ahead, 100.0).is_ok());
    assert_eq!(
        kind(r#"{"exp":1000,"iat":221}"#, &ahead, 100.0),
        ErrorKind::IssuedInFuture
    );
    assert!(run(r#"{"exp":100}"#, &ahead, 104.0).is_ok());
    assert_eq!(kind(r#"{"exp":100}"#, &ahead, 105.0), ErrorKind::Expired);
    // Both zero: strict, as before this allowance existed.
    let strict = both(0.0, 0.0);
    assert_eq!(
        kind(r#"{"exp":1000,"nbf":101}"#, &strict, 100.0),
        ErrorKind::NotYetValid
    );
}

#[test]
fn not_yet_valid_messages_name_the_allowance_ahead() {
    let p = policy(PolicyOptions {
        leeway: 5.0,
        ..Default::default()
    });
    let err = run(r#"{"exp":1000,"nbf":200}"#, &p, 100.0).unwrap_err();
    assert_eq!(
        err.message(),
        "token is not valid before 200 (now 100, leeway ahead 60s)"
    );
    assert!(err.context().contains(&("leeway", Detail::Number(60.0))));
    let err = run(r#"{"exp":1000,"iat":200}"#, &p, 100.0).unwrap_err();
    assert_eq!(
        err.message(),
        "token was issued in the future at 200 (now 100, leeway ahead 60s)"
    );
    let err = run(r#"{"exp":90}"#, &p, 100.0).unwrap_err();
    assert_eq!(err.message(), "token expired at 90 (now 100, leeway 5s)");
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
    // What was expected, and what the token said (for the message to show).
    assert_eq!(
        err.context(),
        &[
            ("expected", Detail::Texts(vec!["https://i/".into()])),
            ("seen", Detail::Texts(vec!["https://evil/".into()])),
        ]
    );
}

#[test]
fn audience_refusals_carry_the_token_values_capped() {
    let p = policy(PolicyOptions {
        audiences: vec!["api".into()],
        required: vec![],
        ..Default::default()
    });
    let long = "a".repeat(300);
    let many: Vec<String> = (0..20).map(|i| format!("\"x{i}\"")).collect();
    let err = run(
        &format!(r#"{{"aud":["{long}",{}]}}"#, many.join(",")),
        &p,
        0.0,
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Audience);
    let Some((_, Detail::Texts(seen))) = err.context().iter().find(|(n, _)| *n == "seen") else {
        panic!("no seen context: {:?}", err.context());
    };
    assert_eq!(seen.len(), 8);
    assert_eq!(seen[0].len(), 128);
    assert_eq!(seen[1], "x0");
    // The message itself quotes nothing from the token.
    assert!(!err.message().contains("x0"));
    let err = run(r#"{"aud":"API"}"#, &p, 0.0).unwrap_err();
    assert!(err
        .context()
        .contains(&("seen", Detail::Texts(vec!["API".into()]))));
}
