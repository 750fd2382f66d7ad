//! Rust lanes of the grelmicro[jwt] benchmark.
//!
//! Reads the fixtures written by `bench/fixtures.py` (same keys, same token
//! bytes as every other lane) and times, per case:
//!
//! - `jsonwebtoken` (aws_lc_rs provider) decoding into a typed struct,
//! - `jsonwebtoken` decoding into `serde_json::Value`,
//! - a bare aws-lc-rs verify of the same signing input with a key parsed once
//!   (the floor: what the signature costs, with nothing around it).
//!
//! Each lane is checked first (right claims back; expired, wrong-audience and
//! tampered tokens rejected; the floor only checks signatures). Same method as
//! the Python lanes: 1,000 warm-up calls, a calibration so one round of a lane
//! lasts about `round_ms`, rounds with lanes interleaved, median and minimum.
//!
//! Usage: `grelmicro-bench-rust FIXTURES OUT [ROUNDS] [ROUND_MS]`

use std::hint::black_box;
use std::time::Instant;

use aws_lc_rs::hmac;
use aws_lc_rs::signature::{self, ParsedPublicKey, VerificationAlgorithm};
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use jsonwebtoken::{decode, Algorithm, DecodingKey, Validation};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    iss: String,
    sub: String,
    aud: String,
    iat: i64,
    nbf: i64,
    exp: i64,
    jti: String,
    scope: String,
    email: String,
    name: String,
    roles: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    permissions: Vec<String>,
}

type Check = Box<dyn Fn(&str) -> Result<Value, String>>;
type Call = Box<dyn Fn(&str) -> bool>;

struct Lane {
    id: &'static str,
    name: String,
    group: &'static str,
    /// Returns the claims (or `Null` for the floor) or why the token was refused.
    check: Check,
    /// The timed call; returns whether the token was accepted.
    call: Call,
    status: String,
    reason: String,
    only_signature: bool,
}

fn unsupported(id: &'static str, name: String, group: &'static str, reason: String) -> Lane {
    Lane {
        id,
        name,
        group,
        check: Box::new(|_| Err(String::new())),
        call: Box::new(|_| false),
        status: "unsupported".into(),
        reason,
        only_signature: false,
    }
}

fn verification(alg: &str) -> Option<&'static dyn VerificationAlgorithm> {
    Some(match alg {
        "RS256" => &signature::RSA_PKCS1_2048_8192_SHA256,
        "RS384" => &signature::RSA_PKCS1_2048_8192_SHA384,
        "RS512" => &signature::RSA_PKCS1_2048_8192_SHA512,
        "PS256" => &signature::RSA_PSS_2048_8192_SHA256,
        "PS384" => &signature::RSA_PSS_2048_8192_SHA384,
        "PS512" => &signature::RSA_PSS_2048_8192_SHA512,
        "ES256" => &signature::ECDSA_P256_SHA256_FIXED,
        "ES384" => &signature::ECDSA_P384_SHA384_FIXED,
        "ES512" => &signature::ECDSA_P521_SHA512_FIXED,
        "EdDSA" => &signature::ED25519,
        _ => return None,
    })
}

fn hmac_algorithm(alg: &str) -> Option<hmac::Algorithm> {
    Some(match alg {
        "HS256" => hmac::HMAC_SHA256,
        "HS384" => hmac::HMAC_SHA384,
        "HS512" => hmac::HMAC_SHA512,
        _ => return None,
    })
}

fn split(token: &str) -> (Vec<u8>, Vec<u8>) {
    let (head, sig) = token.rsplit_once('.').expect("three segments");
    (head.as_bytes().to_vec(), URL_SAFE_NO_PAD.decode(sig).expect("base64url signature"))
}

fn floor_lane(case: &Value, key: &Value) -> Lane {
    let alg = case["alg"].as_str().unwrap();
    let name = format!("floor: signature only (aws-lc-rs {})", AWS_LC_RS_VERSION);
    let raw = STANDARD.decode(key["raw_b64"].as_str().unwrap()).unwrap();
    let (msg, sig) = split(case["tokens"]["valid"].as_str().unwrap());
    let (_, bad) = split(case["tokens"]["tampered"].as_str().unwrap());
    let verify: Box<dyn Fn(&[u8], &[u8]) -> bool> = if let Some(h) = hmac_algorithm(alg) {
        let k = hmac::Key::new(h, &raw);
        Box::new(move |m, s| hmac::verify(&k, m, s).is_ok())
    } else if let Some(v) = verification(alg) {
        let parsed = match ParsedPublicKey::new(v, &raw) {
            Ok(p) => p,
            Err(e) => return unsupported("floor-sig", name, "floor", format!("key: {e}")),
        };
        Box::new(move |m, s| parsed.verify_sig(m, s).is_ok())
    } else {
        return unsupported("floor-sig", name, "floor", format!("no {alg}"));
    };
    let verify = std::rc::Rc::new(verify);
    let (v1, m1, s1) = (verify.clone(), msg.clone(), sig.clone());
    let (v2, m2) = (verify, msg);
    Lane {
        id: "floor-sig",
        name,
        group: "floor",
        // The floor is checked on its pre-split bytes: the valid signature
        // passes and the tampered one fails (the token text is not used).
        check: Box::new(move |which| {
            let s = if which == "tampered" { &bad } else { &s1 };
            if which == "valid" || which == "tampered" {
                if v1(&m1, s) { Ok(Value::Null) } else { Err("bad signature".into()) }
            } else {
                Ok(Value::Null)
            }
        }),
        call: Box::new(move |_| v2(&m2, &sig)),
        status: "ok".into(),
        reason: String::new(),
        only_signature: true,
    }
}

fn jsonwebtoken_lanes(case: &Value, key: &Value, fx: &Value) -> Vec<Lane> {
    let alg_name = case["alg"].as_str().unwrap();
    let typed_name = format!("jsonwebtoken {JSONWEBTOKEN_VERSION} (aws_lc_rs) → struct");
    let value_name = format!("jsonwebtoken {JSONWEBTOKEN_VERSION} (aws_lc_rs) → serde_json::Value");
    let alg: Algorithm = match alg_name.parse() {
        Ok(a) => a,
        Err(e) => {
            return vec![
                unsupported("jsonwebtoken-struct", typed_name, "peer", format!("{alg_name}: {e}")),
                unsupported("jsonwebtoken-value", value_name, "peer", format!("{alg_name}: {e}")),
            ]
        }
    };
    let decoding = if alg_name.starts_with("HS") {
        DecodingKey::from_secret(&STANDARD.decode(key["secret_b64"].as_str().unwrap()).unwrap())
    } else {
        let pem = key["pem"].as_str().unwrap().as_bytes();
        match key["kind"].as_str().unwrap() {
            "rsa" => DecodingKey::from_rsa_pem(pem),
            "ec" => DecodingKey::from_ec_pem(pem),
            _ => DecodingKey::from_ed_pem(pem),
        }
    };
    let decoding = match decoding {
        Ok(d) => std::rc::Rc::new(d),
        Err(e) => {
            return vec![
                unsupported("jsonwebtoken-struct", typed_name, "peer", format!("key: {e}")),
                unsupported("jsonwebtoken-value", value_name, "peer", format!("key: {e}")),
            ]
        }
    };
    let mut validation = Validation::new(alg);
    validation.leeway = 0;
    validation.validate_nbf = true;
    validation.set_audience(&[fx["audience"].as_str().unwrap()]);
    validation.set_issuer(&[fx["issuer"].as_str().unwrap()]);
    validation.set_required_spec_claims(&["exp", "aud", "iss"]);
    let validation = std::rc::Rc::new(validation);

    let (k1, v1, k2, v2) = (decoding.clone(), validation.clone(), decoding.clone(), validation.clone());
    let (k3, v3, k4, v4) = (decoding.clone(), validation.clone(), decoding, validation);
    vec![
        Lane {
            id: "jsonwebtoken-struct",
            name: typed_name,
            group: "peer",
            check: Box::new(move |t| {
                decode::<Claims>(t, &k1, &v1)
                    .map(|d| serde_json::to_value(d.claims).unwrap())
                    .map_err(|e| e.to_string())
            }),
            call: Box::new(move |t| black_box(decode::<Claims>(t, &k2, &v2)).is_ok()),
            status: "ok".into(),
            reason: String::new(),
            only_signature: false,
        },
        Lane {
            id: "jsonwebtoken-value",
            name: value_name,
            group: "peer",
            check: Box::new(move |t| decode::<Value>(t, &k3, &v3).map(|d| d.claims).map_err(|e| e.to_string())),
            call: Box::new(move |t| black_box(decode::<Value>(t, &k4, &v4)).is_ok()),
            status: "ok".into(),
            reason: String::new(),
            only_signature: false,
        },
    ]
}

const JSONWEBTOKEN_VERSION: &str = env!("JSONWEBTOKEN_VERSION");
const AWS_LC_RS_VERSION: &str = env!("AWS_LC_RS_VERSION");

fn check(lane: &Lane, case: &Value) -> Option<String> {
    let tokens = &case["tokens"];
    match (lane.check)(tokens["valid"].as_str().unwrap()) {
        Err(e) => return Some(format!("valid token refused: {e}")),
        Ok(claims) => {
            if !lane.only_signature && claims != case["payload"] {
                return Some("wrong claims back".into());
            }
        }
    }
    let bad: &[&str] = if lane.only_signature { &["tampered"] } else { &["expired", "wrong_aud", "tampered"] };
    for which in bad {
        let arg = if lane.only_signature { which } else { tokens[*which].as_str().unwrap() };
        if (lane.check)(arg).is_ok() {
            return Some(format!("accepted the {which} token"));
        }
    }
    None
}

fn run_loop(lane: &Lane, raw: &[u8], n: usize) -> u128 {
    let start = Instant::now();
    for _ in 0..n {
        // The token as a request handler has it: bytes, checked as text per call.
        let tok = std::str::from_utf8(black_box(raw)).unwrap();
        black_box((lane.call)(tok));
    }
    start.elapsed().as_nanos()
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let fixtures = args.get(1).expect("usage: FIXTURES OUT [ROUNDS] [ROUND_MS]");
    let out = args.get(2).expect("usage: FIXTURES OUT [ROUNDS] [ROUND_MS]");
    let rounds: usize = args.get(3).map_or(15, |s| s.parse().unwrap());
    let round_ms: f64 = args.get(4).map_or(20.0, |s| s.parse().unwrap());
    let fx: Value = serde_json::from_str(&std::fs::read_to_string(fixtures).unwrap()).unwrap();
    let mut results = Vec::new();
    for case in fx["cases"].as_array().unwrap() {
        let suite = case["suite"].as_str().unwrap();
        if !["algs", "algs-extra", "sizes", "secrets"].contains(&suite) {
            continue;
        }
        let key = &fx["keys"][case["key"].as_str().unwrap()];
        let mut lanes = jsonwebtoken_lanes(case, key, &fx);
        lanes.push(floor_lane(case, key));
        for lane in &mut lanes {
            if lane.status == "ok" {
                if let Some(problem) = check(lane, case) {
                    lane.status = "failed".into();
                    lane.reason = problem;
                }
            }
        }
        let raw = case["tokens"]["valid"].as_str().unwrap().as_bytes().to_vec();
        let ready: Vec<usize> = (0..lanes.len()).filter(|&i| lanes[i].status == "ok").collect();
        let mut calls = vec![0usize; lanes.len()];
        for &i in &ready {
            run_loop(&lanes[i], &raw, 1000);
            let mut n = 8usize;
            let spent = loop {
                let spent = run_loop(&lanes[i], &raw, n);
                if spent >= 2_000_000 || n >= 1 << 24 {
                    break spent;
                }
                n *= 4;
            };
            let per = spent as f64 / n as f64;
            calls[i] = ((round_ms * 1e6 / per) as usize).max(3);
        }
        let mut per_call: Vec<Vec<f64>> = vec![Vec::new(); lanes.len()];
        for r in 0..rounds {
            for k in 0..ready.len() {
                let i = ready[(k + r) % ready.len()];
                let spent = run_loop(&lanes[i], &raw, calls[i]);
                per_call[i].push(spent as f64 / calls[i] as f64);
            }
        }
        for (i, lane) in lanes.iter().enumerate() {
            let mut rec = json!({
                "suite": suite, "case": case["name"], "lane_id": lane.id, "lane": lane.name,
                "group": lane.group, "status": lane.status, "reason": lane.reason, "note": "",
            });
            if lane.status == "ok" {
                let min = per_call[i].iter().copied().fold(f64::INFINITY, f64::min);
                rec["median_ns"] = json!(median(&mut per_call[i]));
                rec["min_ns"] = json!(min);
                rec["rounds"] = json!(rounds);
                rec["calls_per_round"] = json!(calls[i]);
            }
            results.push(rec);
        }
        eprintln!("[rust] {}: {} lanes timed", case["name"].as_str().unwrap(), ready.len());
    }
    let doc = json!({
        "env": "rust",
        "meta": {"runtime": format!("Rust ({})", env!("RUSTC_VERSION")), "versions": {"jsonwebtoken": JSONWEBTOKEN_VERSION, "aws-lc-rs": AWS_LC_RS_VERSION}},
        "results": results,
    });
    std::fs::write(out, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
}
