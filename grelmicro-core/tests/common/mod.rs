//! What the Wycheproof tests share: the file formats (only the members
//! used), reading a vector file, and counting outcomes.
//!
//! Provenance: see `tests/wycheproof.rs` and `tests/wycheproof/README.md`.
#![allow(dead_code)] // each test crate uses its own part

use std::fs;
use std::path::PathBuf;

use grelmicro_core::ErrorKind;
use serde::Deserialize;
use serde_json::Value;

// ---------------------------------------------------------------------------
// File formats (only the members used here)
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Label {
    Valid,
    Invalid,
    Acceptable,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SignatureFile {
    pub number_of_tests: usize,
    pub test_groups: Vec<SignatureGroup>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SignatureGroup {
    pub public_key_der: String,
    #[serde(default)]
    pub public_key: Value,
    #[serde(default)]
    pub s_len: Option<usize>,
    pub tests: Vec<SignatureVector>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SignatureVector {
    pub tc_id: u32,
    pub comment: String,
    pub msg: String,
    pub sig: String,
    pub result: Label,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MacFile {
    pub number_of_tests: usize,
    pub test_groups: Vec<MacGroup>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MacGroup {
    pub key_size: usize,
    pub tag_size: usize,
    pub tests: Vec<MacVector>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MacVector {
    pub tc_id: u32,
    pub comment: String,
    pub key: String,
    pub msg: String,
    pub tag: String,
    pub result: Label,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JoseFile {
    pub number_of_tests: usize,
    pub test_groups: Vec<JoseGroup>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JoseGroup {
    pub comment: String,
    pub private: Value,
    pub tests: Vec<JoseVector>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JoseVector {
    pub tc_id: u32,
    pub comment: String,
    pub jws: Value,
    pub result: Label,
}

pub fn read<T: serde::de::DeserializeOwned>(name: &str) -> T {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("wycheproof")
        .join(name);
    let text = fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

pub fn hex(text: &str) -> Vec<u8> {
    assert!(text.len() % 2 == 0, "odd-length hex");
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex digit"))
        .collect()
}

// ---------------------------------------------------------------------------
// Counting
// ---------------------------------------------------------------------------

/// What happened to the vectors of one file.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Vectors whose signature went through `Key::verify` and got the
    /// expected answer.
    pub checked: usize,
    /// Of those, `acceptable` vectors (all refused: see the module docs).
    pub acceptable_refused: usize,
    /// Vectors whose key the core refuses when it is built (the refusal and
    /// its kind are asserted instead of a signature check).
    pub key_refused: usize,
    /// HMAC vectors with a truncated tag: JWS never truncates, so each tag
    /// is asserted to be refused by the full-length verifier whatever its
    /// label (not counted as checked Wycheproof verdicts).
    pub truncated_tag_refused: usize,
}

impl Counts {
    pub fn total(&self) -> usize {
        self.checked + self.key_refused + self.truncated_tag_refused
    }
}

pub fn expect_verdict(
    file: &str,
    tc_id: u32,
    comment: &str,
    label: Label,
    outcome: &grelmicro_core::Result<()>,
) {
    match (label, outcome) {
        (Label::Valid, Ok(())) => {}
        (Label::Valid, Err(err)) => {
            panic!("{file} tcId {tc_id} ({comment}): valid vector refused: {err}")
        }
        (Label::Invalid | Label::Acceptable, Ok(())) => {
            panic!("{file} tcId {tc_id} ({comment}): {label:?} vector accepted")
        }
        (Label::Invalid | Label::Acceptable, Err(err)) => assert_eq!(
            err.kind(),
            ErrorKind::Signature,
            "{file} tcId {tc_id} ({comment}): refused with the wrong kind: {err}"
        ),
    }
}
