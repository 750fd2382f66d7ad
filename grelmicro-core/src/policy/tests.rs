//! Tests of the policy: ranges, required claims, algorithms.

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
                leeway_ahead: -1.0,
                ..Default::default()
            },
            "leeway_ahead",
        ),
        (
            PolicyOptions {
                leeway_ahead: f64::NAN,
                ..Default::default()
            },
            "leeway_ahead",
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
fn limits_hold_at_their_bounds_and_refuse_past_them() {
    type Edit = fn(&mut PolicyOptions);
    let build = |edit: Edit| {
        let mut options = PolicyOptions::default();
        edit(&mut options);
        Policy::new(options)
    };
    let accepted: [Edit; 8] = [
        |o| o.leeway = 0.0,
        |o| o.leeway = 3600.0,
        |o| o.leeway_ahead = 0.0,
        |o| o.leeway_ahead = 3600.0,
        |o| o.max_age = Some(f64::MIN_POSITIVE),
        |o| o.max_token_size = 16,
        |o| o.max_token_size = 1 << 20,
        |o| o.max_depth = 512,
    ];
    for edit in accepted {
        assert!(build(edit).is_ok());
    }
    let refused: [(Edit, &str, &str); 9] = [
        (|o| o.leeway = 3600.5, "leeway", "3600.5"),
        (|o| o.leeway_ahead = 3601.0, "leeway_ahead", "3601"),
        (|o| o.leeway = f64::INFINITY, "leeway", "inf"),
        (|o| o.max_age = Some(-2.5), "max_age", "-2.5"),
        (|o| o.max_age = Some(f64::INFINITY), "max_age", "inf"),
        (|o| o.max_age = Some(f64::NAN), "max_age", "NaN"),
        (
            |o| o.max_token_size = (1 << 20) + 1,
            "max_token_size",
            "1048577",
        ),
        (
            |o| o.max_token_size = usize::MAX,
            "max_token_size",
            "18446744073709551615",
        ),
        (|o| o.max_depth = 513, "max_depth", "513"),
    ];
    for (edit, field, value) in refused {
        let err = build(edit).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidConfig);
        assert!(err.message().starts_with(field), "{}", err.message());
        assert!(!err.message().contains(value), "{}", err.message());
    }
}

#[test]
fn an_unknown_algorithm_is_named_by_its_right_case_never_echoed() {
    let refuse = |name: &str| {
        Policy::new(PolicyOptions {
            algorithms: Some(vec![name.to_owned()]),
            ..Default::default()
        })
        .unwrap_err()
    };
    let err = refuse("es256k");
    assert_eq!(err.kind(), ErrorKind::InvalidConfig);
    assert!(
        err.message().starts_with("algorithms "),
        "{}",
        err.message()
    );
    assert!(
        err.message().contains("did you mean ES256K?"),
        "{}",
        err.message()
    );
    assert!(!err.message().contains("es256k"), "{}", err.message());
    let err = refuse("s3cr3t-passed-by-mistake");
    assert!(!err.message().contains("did you mean"), "{}", err.message());
    assert!(!err.message().contains("s3cr3t"), "{}", err.message());
}

#[test]
fn azp_when_set_must_be_present_and_one_of_the_parties() {
    use crate::claims::decode;
    use crate::json::ValueBuilder;
    let check = |policy: &Policy, payload: &str| {
        decode(payload.as_bytes(), policy, &mut ValueBuilder, 0.0).map(|_| ())
    };
    let parties = Policy::new(PolicyOptions {
        azp: vec!["web".into(), "cli".into()],
        required: vec![],
        ..Default::default()
    })
    .unwrap();
    assert!(check(&parties, r#"{"azp":"web"}"#).is_ok());
    assert!(check(&parties, r#"{"azp":"cli","x":1}"#).is_ok());
    let kind = |payload: &str| check(&parties, payload).unwrap_err().kind();
    assert_eq!(kind(r#"{}"#), ErrorKind::MissingClaim);
    assert_eq!(kind(r#"{"azp":"WEB"}"#), ErrorKind::InvalidClaim);
    assert_eq!(kind(r#"{"azp":["web"]}"#), ErrorKind::InvalidClaim);
    assert_eq!(kind(r#"{"azp":null}"#), ErrorKind::InvalidClaim);
    assert_eq!(kind(r#"{"azp":"web","azp":"x"}"#), ErrorKind::Malformed);
    // Unset, azp is an ordinary claim of any shape.
    let open = Policy::new(PolicyOptions {
        required: vec![],
        ..Default::default()
    })
    .unwrap();
    assert!(check(&open, r#"{"azp":["any",1]}"#).is_ok());
    assert!(check(&open, r#"{}"#).is_ok());
    let err = Policy::new(PolicyOptions {
        azp: vec![String::new()],
        ..Default::default()
    })
    .unwrap_err();
    assert!(err.message().starts_with("azp "), "{}", err.message());
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
