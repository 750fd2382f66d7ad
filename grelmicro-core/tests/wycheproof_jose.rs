//! Wycheproof JOSE vectors (`json_web_signature_test.json`,
//! `json_web_key_test.json`) run through the core: compact JWS strings
//! checked with `Key::jwk_json` / `KeySet::from_jwks` and
//! `Verifier::authenticate`. Provenance and the counting rules are in
//! `tests/wycheproof.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;

use grelmicro_core::verifier::PayloadRoom;
use grelmicro_core::{Algorithm, ErrorKind, Key, KeySet, Policy, PolicyOptions, Verifier};
use serde_json::Value;

mod common;
use common::{read, JoseFile, Label};

// ---------------------------------------------------------------------------
// JOSE level: compact JWS with JWKs
// ---------------------------------------------------------------------------

/// What the core does with one JOSE vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    Accepted,
    /// The key (or every key of the set) was refused when built.
    KeyRefused(ErrorKind),
    /// The token was refused by the verifier.
    Rejected(ErrorKind),
}

/// JWK members that only a private key has. The verifier side holds the
/// public half, so they are removed before the key is given to the core (the
/// files ship private keys so that other libraries can also sign).
const PRIVATE_MEMBERS: [&str; 7] = ["d", "p", "q", "dp", "dq", "qi", "oth"];

fn public_half(jwk: &Value) -> Value {
    let mut jwk = jwk.clone();
    if let Value::Object(members) = &mut jwk {
        if members.get("kty").and_then(Value::as_str) != Some("oct") {
            for name in PRIVATE_MEMBERS {
                members.remove(name);
            }
        }
    }
    jwk
}

fn has_private_members(jwk: &Value) -> bool {
    jwk.get("kty").and_then(Value::as_str) != Some("oct")
        && PRIVATE_MEMBERS.iter().any(|m| jwk.get(m).is_some())
}

fn policy() -> Arc<Policy> {
    Arc::new(Policy::new(PolicyOptions::default()).expect("default policy"))
}

fn verifier_for(keys: KeySet) -> Result<Verifier, ErrorKind> {
    Verifier::new(Arc::new(keys), policy()).map_err(|e| e.kind())
}

fn token_bytes(jws: &Value) -> Vec<u8> {
    match jws {
        Value::String(text) => text.clone().into_bytes(),
        // JSON serialization (tcId 17): handed over as its JSON text.
        other => other.to_string().into_bytes(),
    }
}

fn authenticate(verifier: &Result<Verifier, ErrorKind>, jws: &Value) -> Seen {
    match verifier {
        Err(kind) => Seen::KeyRefused(*kind),
        Ok(verifier) => match verifier.authenticate(&token_bytes(jws), &mut PayloadRoom::new()) {
            Ok(_) => Seen::Accepted,
            Err(err) => Seen::Rejected(err.kind()),
        },
    }
}

/// One JWK, public half, symmetric keys allowed (the caller gives the key in
/// code and opts in, as design §3 requires).
fn single_key_verifier(jwk: &Value) -> Result<Verifier, ErrorKind> {
    let text = public_half(jwk).to_string();
    let key = Key::jwk_json(text.as_bytes(), None, true).map_err(|e| e.kind())?;
    verifier_for(KeySet::new(vec![Arc::new(key)]).map_err(|e| e.kind())?)
}

fn key_set_verifier(jwks: &Value, allow_symmetric: bool) -> Result<Verifier, ErrorKind> {
    let mut public = jwks.clone();
    if let Some(Value::Array(keys)) = public.get_mut("keys") {
        for key in keys.iter_mut() {
            *key = public_half(key);
        }
    }
    let text = public.to_string();
    let set = KeySet::from_jwks(text.as_bytes(), allow_symmetric, 100).map_err(|e| e.kind())?;
    verifier_for(set)
}

/// A vector whose answer here differs from its Wycheproof label, with the
/// answer the core gives and why that answer is the intended one.
struct Deviation {
    tc_id: u32,
    seen: Seen,
    why: &'static str,
}

/// `json_web_signature_test.json` vectors answered differently from their
/// label. Everything else must match the label exactly.
const JWS_DEVIATIONS: &[Deviation] = &[
    Deviation {
        tc_id: 259,
        seen: Seen::Rejected(ErrorKind::Malformed),
        why: "empty payload (RS256): a JWT payload is a JSON object, so the core refuses an empty payload segment",
    },
    Deviation {
        tc_id: 264,
        seen: Seen::Rejected(ErrorKind::Malformed),
        why: "empty payload (RS384), as tcId 259",
    },
    Deviation {
        tc_id: 268,
        seen: Seen::Rejected(ErrorKind::Malformed),
        why: "empty payload (RS512), as tcId 259",
    },
    Deviation {
        tc_id: 272,
        seen: Seen::Rejected(ErrorKind::Malformed),
        why: "empty payload (PS256), as tcId 259",
    },
    Deviation {
        tc_id: 320,
        seen: Seen::Rejected(ErrorKind::Malformed),
        why: "empty payload (PS384), as tcId 259",
    },
    Deviation {
        tc_id: 325,
        seen: Seen::Rejected(ErrorKind::Malformed),
        why: "empty payload (PS512), as tcId 259",
    },
    Deviation {
        tc_id: 346,
        seen: Seen::Rejected(ErrorKind::Algorithm),
        why: "RFC 7520 figure 20: the token says PS384 but the JWK says alg PS256; a key is bound to one \
              algorithm (design §3). With the key bound to PS384 it verifies (asserted below)",
    },
    Deviation {
        tc_id: 350,
        seen: Seen::Rejected(ErrorKind::Algorithm),
        why: "as tcId 346 (key_ops variant)",
    },
    Deviation {
        tc_id: 347,
        seen: Seen::KeyRefused(ErrorKind::InvalidKey),
        why: "RFC 7520 figure 27: the JWK says alg \"ES521\", which is no JWS algorithm, so the key is \
              refused. Without that member (P-521 gives ES512) it verifies (asserted below)",
    },
    Deviation {
        tc_id: 351,
        seen: Seen::KeyRefused(ErrorKind::InvalidKey),
        why: "as tcId 347 (key_ops variant)",
    },
    Deviation {
        tc_id: 349,
        seen: Seen::KeyRefused(ErrorKind::InvalidKey),
        why: "key_ops is [\"sign, verify\"]: one malformed string, not \"verify\"; a JWK whose key_ops \
              lacks verify is refused (design §3). With [\"sign\",\"verify\"] it verifies (asserted below)",
    },
    Deviation {
        tc_id: 367,
        seen: Seen::Accepted,
        why: "upstream data: labelled invalid (\"invalidBase64Padding\") but byte-identical to the valid \
              tcId 357 (asserted below), so no verifier can refuse it",
    },
    Deviation {
        tc_id: 370,
        seen: Seen::Accepted,
        why: "upstream data: labelled invalid (\"invalidBase64PaddingInPayload\") but byte-identical to \
              the valid tcId 357 (asserted below)",
    },
    Deviation {
        tc_id: 372,
        seen: Seen::Rejected(ErrorKind::Malformed),
        why: "labelled valid for libraries that skip characters outside the alphabet; the core decodes \
              base64url strictly (design §4), so a '?' in the header is malformed",
    },
    Deviation {
        tc_id: 373,
        seen: Seen::Rejected(ErrorKind::Malformed),
        why: "as tcId 372, with the '?' in the payload: the payload's base64url is checked (strictly) \
              before the signature work, so it is malformed",
    },
];

fn expected_by_label(label: Label, seen: Seen) -> bool {
    match label {
        Label::Valid => seen == Seen::Accepted,
        Label::Invalid | Label::Acceptable => seen != Seen::Accepted,
    }
}

/// Checks every vector of a JOSE file against its label or its deviation;
/// returns `(matching the label, documented deviations)`.
fn check_jose_vectors(
    name: &str,
    results: &[(u32, Label, String, Seen)],
    deviations: &[Deviation],
) -> (usize, usize) {
    let mut failures = Vec::new();
    let mut deviating = 0;
    for (tc_id, label, comment, seen) in results {
        if let Some(deviation) = deviations.iter().find(|d| d.tc_id == *tc_id) {
            if *seen == deviation.seen {
                deviating += 1;
                println!(
                    "{name} tcId {tc_id} ({comment}): {label:?} -> {seen:?}: {}",
                    deviation.why
                );
            } else {
                failures.push(format!(
                    "tcId {tc_id} ({comment}): documented {:?}, got {seen:?}",
                    deviation.seen
                ));
            }
        } else if !expected_by_label(*label, *seen) {
            failures.push(format!(
                "tcId {tc_id} ({comment}): labelled {label:?}, got {seen:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{name}:\n{}", failures.join("\n"));
    for deviation in deviations {
        assert!(
            results.iter().any(|r| r.0 == deviation.tc_id),
            "{name}: deviation for missing tcId {}",
            deviation.tc_id
        );
    }
    (results.len() - deviating, deviating)
}

#[test]
fn json_web_signature() {
    let name = "json_web_signature_test.json";
    let file: JoseFile = read(name);
    let mut results = Vec::new();
    let mut by_id = BTreeMap::new();
    for group in &file.test_groups {
        let verifier = single_key_verifier(&group.private);
        if has_private_members(&group.private) {
            // The key as shipped (with its private half) is refused.
            let text = group.private.to_string();
            let err = Key::jwk_json(text.as_bytes(), None, true).expect_err("private JWK accepted");
            assert_eq!(
                err.kind(),
                ErrorKind::InvalidKey,
                "{name} group {}",
                group.comment
            );
        }
        for vector in &group.tests {
            let seen = authenticate(&verifier, &vector.jws);
            by_id.insert(vector.tc_id, vector.jws.clone());
            results.push((vector.tc_id, vector.result, vector.comment.clone(), seen));
        }
    }
    assert_eq!(results.len(), file.number_of_tests);
    let (matching, deviating) = check_jose_vectors(name, &results, JWS_DEVIATIONS);

    // tcId 367 and 370 carry the very bytes of the valid tcId 357.
    assert_eq!(by_id[&367], by_id[&357]);
    assert_eq!(by_id[&370], by_id[&357]);
    // The RFC 7520 keys verify once configured the way the core requires.
    rfc7520_variants(&file);
    // Without the explicit opt-in, an `oct` JWK is refused.
    let hs256 = public_half(&file.test_groups[0].private).to_string();
    assert_eq!(
        Key::jwk_json(hs256.as_bytes(), None, false)
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidKey
    );

    println!(
        "{name}: {} vectors, {matching} as labelled, {deviating} documented deviations",
        results.len()
    );
    assert_eq!((matching, deviating), (386, 15));
}

/// The RFC 7520 figures whose JWK the core refuses as shipped verify once the
/// key is given the way the core expects: the algorithm chosen by the caller
/// (20), no bogus `alg` (27), well-formed `key_ops` (13).
fn rfc7520_variants(file: &JoseFile) {
    let find = |tc_id: u32| {
        file.test_groups
            .iter()
            .find_map(|g| g.tests.iter().find(|t| t.tc_id == tc_id).map(|t| (g, t)))
            .expect("vector present")
    };
    let fixed =
        |tc_id: u32, alg: Option<Algorithm>, edit: &dyn Fn(&mut serde_json::Map<String, Value>)| {
            let (group, vector) = find(tc_id);
            let mut jwk = public_half(&group.private);
            edit(jwk.as_object_mut().expect("JWK object"));
            let key = Key::jwk_json(jwk.to_string().as_bytes(), alg, false)
                .unwrap_or_else(|e| panic!("tcId {tc_id}: {e}"));
            let verifier = verifier_for(KeySet::new(vec![Arc::new(key)]).expect("key set"));
            assert_eq!(
                authenticate(&verifier, &vector.jws),
                Seen::Accepted,
                "tcId {tc_id}"
            );
        };
    fixed(346, Some(Algorithm::PS384), &|jwk| {
        jwk.remove("alg");
    });
    fixed(347, None, &|jwk| {
        jwk.remove("alg");
    });
    fixed(349, None, &|jwk| {
        jwk.insert("key_ops".into(), serde_json::json!(["sign", "verify"]));
    });
}

/// `json_web_key_test.json` vectors answered differently from their label.
const JWK_DEVIATIONS: &[Deviation] = &[
    Deviation {
        tc_id: 1,
        seen: Seen::Accepted,
        why: "mixed symmetric and asymmetric keys: refused by default because oct keys need the opt-in \
              (asserted below); with the opt-in every key stays bound to its own algorithm, so the HS256 \
              key verifies its own HS256 token and no key can be used as another's (design §3)",
    },
    Deviation {
        tc_id: 4,
        seen: Seen::Accepted,
        why: "duplicate kid: the second key's k is not canonical base64url (its last character carries \
              non-zero spare bits), so the strict decoder skips that key as unusable and the kid names \
              one key only. The same set with a canonical second key is refused (asserted below)",
    },
    Deviation {
        tc_id: 7,
        seen: Seen::Accepted,
        why: "a 2049-bit RSA key with the ROCA (CVE-2017-15361) structure: the core does not fingerprint \
              ROCA moduli (not in design §3); the key meets every rule the core has",
    },
];

#[test]
fn json_web_key() {
    let name = "json_web_key_test.json";
    let file: JoseFile = read(name);
    let mut results = Vec::new();
    for group in &file.test_groups {
        // The caller opted in to symmetric keys (most groups are `oct`).
        let verifier = key_set_verifier(&group.private, true);
        for vector in &group.tests {
            results.push((
                vector.tc_id,
                vector.result,
                vector.comment.clone(),
                authenticate(&verifier, &vector.jws),
            ));
        }
        // As shipped, with private halves, no asymmetric key is usable.
        let keys = group.private["keys"].as_array().expect("keys");
        if keys.iter().all(has_private_members) {
            let text = group.private.to_string();
            assert!(
                KeySet::from_jwks(text.as_bytes(), true, 100).is_err(),
                "{name} group {}",
                group.comment
            );
        }
    }
    assert_eq!(results.len(), file.number_of_tests);
    let (matching, deviating) = check_jose_vectors(name, &results, JWK_DEVIATIONS);

    let group = |tc_id: u32| {
        file.test_groups
            .iter()
            .find(|g| g.tests.iter().any(|t| t.tc_id == tc_id))
            .expect("group present")
    };
    // tcId 1 without the opt-in: the `oct` key is skipped, so the verifier
    // serves ES256 only and the HS256 token's algorithm is not allowed.
    let mixed = group(1);
    let token = &mixed.tests[0].jws;
    assert_eq!(
        authenticate(&key_set_verifier(&mixed.private, false), token),
        Seen::Rejected(ErrorKind::Algorithm)
    );
    assert_eq!(
        authenticate(&key_set_verifier(&mixed.private, true), token),
        Seen::Accepted
    );

    // tcId 4 with its second key re-encoded canonically: the kid is unusable,
    // and with no other key in the set the whole JWKS is refused (no usable key).
    let duplicate = group(4);
    let mut canonical = duplicate.private.clone();
    let second = &mut canonical["keys"][1]["k"];
    *second = Value::String(clear_spare_bits(second.as_str().expect("k")));
    assert_eq!(
        authenticate(&key_set_verifier(&canonical, true), &duplicate.tests[0].jws),
        Seen::KeyRefused(ErrorKind::InvalidKey)
    );

    println!(
        "{name}: {} vectors, {matching} as labelled, {deviating} documented deviations",
        results.len()
    );
    assert_eq!((matching, deviating), (23, 3));
}

/// Re-encodes an unpadded base64url string of length 4n+3 canonically: the
/// last character carries 4 data bits and 2 spare bits, which must be zero.
fn clear_spare_bits(text: &str) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    assert_eq!(text.len() % 4, 3, "only the 4n+3 case is needed here");
    let last = text.as_bytes()[text.len() - 1];
    let index = ALPHABET
        .iter()
        .position(|c| *c == last)
        .expect("base64url character");
    let fixed = char::from(ALPHABET[index & !0b11]);
    format!("{}{fixed}", &text[..text.len() - 1])
}
