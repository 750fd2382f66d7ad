//! Strict JSON decoding on top of jiter's pull parser.
//!
//! jiter does the lexing (UTF-8 validation, escapes, lone surrogates, exact
//! integers); this module adds what a verifier needs on top: duplicate member
//! names are refused, nesting depth is capped, and values are handed to a
//! [`Builder`] so the same walk builds Python objects (in `python/objects.rs`) or the
//! plain Rust [`Value`] used by key parsing and the tests.

use std::collections::HashSet;

use jiter::{Jiter, JiterError, NumberAny, NumberInt, Peek};
use num_bigint::BigInt;
use smallvec::SmallVec;

use crate::error::{Error, ErrorKind, Result};

/// The items of one JSON array as they are decoded: up to 8 on the stack
/// (claims arrays are short: `aud`, roles, scopes), so the usual token
/// costs no heap allocation for them.
pub type Items<V> = SmallVec<[V; 8]>;

/// Receives decoded values; one implementation per output representation.
pub trait Builder {
    type Value;
    type Key;
    type Object;

    fn null(&mut self) -> Result<Self::Value>;
    fn boolean(&mut self, value: bool) -> Result<Self::Value>;
    fn int(&mut self, value: i64) -> Result<Self::Value>;
    fn big_int(&mut self, value: &BigInt) -> Result<Self::Value>;
    fn float(&mut self, value: f64) -> Result<Self::Value>;
    fn string(&mut self, value: &str) -> Result<Self::Value>;
    fn array(&mut self, items: Items<Self::Value>) -> Result<Self::Value>;
    /// A member name; `common` is its number in the common claim names
    /// when the walk looked it up (the top level of a payload), else `None`.
    fn key(&mut self, name: &str, common: Option<usize>) -> Result<Self::Key>;
    fn object(&mut self) -> Result<Self::Object>;
    /// Inserts a member; returns `false` when the name was already present.
    fn insert(
        &mut self,
        object: &mut Self::Object,
        key: Self::Key,
        value: Self::Value,
    ) -> Result<bool>;
    fn finish_object(&mut self, object: Self::Object) -> Result<Self::Value>;
    /// A string value equal to a configured issuer (`issuer = true`) or
    /// audience at `index`; builders may hand out a shared object.
    fn known(&mut self, issuer: bool, index: usize, text: &str) -> Result<Self::Value> {
        let _ = (issuer, index);
        self.string(text)
    }
    /// Starts the top-level object of a token payload.
    fn root(&mut self) -> Result<Self::Object> {
        self.object()
    }
    /// Finishes the top-level object of a token payload.
    fn finish_root(&mut self, object: Self::Object) -> Result<Self::Value> {
        self.finish_object(object)
    }
}

/// Maps a jiter error to ours without echoing any input bytes.
/// Every jiter failure is malformed input; positions and snippets stay out
/// of the message (they are token bytes).
impl From<JiterError> for Error {
    #[cold]
    fn from(_: JiterError) -> Error {
        Error::new(ErrorKind::Malformed, "invalid JSON")
    }
}

#[cold]
pub(crate) fn duplicate_member() -> Error {
    Error::new(ErrorKind::Malformed, "duplicate JSON member name")
}

#[cold]
pub(crate) fn too_deep() -> Error {
    Error::new(ErrorKind::TooLarge, "JSON nesting is deeper than allowed")
}

/// Decodes the value whose first byte `peek` announced.
///
/// `depth` counts the containers already open around this value.
pub fn value<B: Builder>(
    jiter: &mut Jiter<'_>,
    peek: Peek,
    builder: &mut B,
    depth: usize,
    max_depth: usize,
) -> Result<B::Value> {
    match peek {
        Peek::Null => {
            jiter.known_null()?;
            builder.null()
        }
        Peek::True | Peek::False => {
            let value = jiter.known_bool(peek)?;
            builder.boolean(value)
        }
        Peek::String => {
            let text = jiter.known_str()?;
            builder.string(text)
        }
        Peek::Array => {
            if depth >= max_depth {
                return Err(too_deep());
            }
            let mut items = Items::new();
            let mut next = jiter.known_array()?;
            while let Some(peek) = next {
                items.push(value(jiter, peek, builder, depth + 1, max_depth)?);
                next = jiter.array_step()?;
            }
            builder.array(items)
        }
        Peek::Object => {
            if depth >= max_depth {
                return Err(too_deep());
            }
            let mut object = builder.object()?;
            let mut name = jiter.known_object()?;
            while let Some(text) = name {
                let key = builder.key(text, None)?;
                let peek = jiter.peek()?;
                let member = value(jiter, peek, builder, depth + 1, max_depth)?;
                if !builder.insert(&mut object, key, member)? {
                    return Err(duplicate_member());
                }
                name = jiter.next_key()?;
            }
            builder.finish_object(object)
        }
        _ => number(jiter, peek, builder),
    }
}

/// A number literal beyond the range of a double (`1e400`, `-1e309`): it
/// would become an infinity, so it is refused wherever it appears.
pub(crate) const NON_FINITE: Error = Error::new(
    ErrorKind::Malformed,
    "a JSON number is out of range (it would not be finite)",
);

fn number<B: Builder>(jiter: &mut Jiter<'_>, peek: Peek, builder: &mut B) -> Result<B::Value> {
    match jiter.known_number(peek)? {
        NumberAny::Int(NumberInt::Int(int)) => builder.int(int),
        NumberAny::Int(NumberInt::BigInt(big)) => builder.big_int(&big),
        NumberAny::Float(float) if float.is_finite() => builder.float(float),
        NumberAny::Float(_) => Err(NON_FINITE),
    }
}

/// Decodes a whole document (one value, nothing after it).
pub fn document<B: Builder>(data: &[u8], builder: &mut B, max_depth: usize) -> Result<B::Value> {
    let mut jiter = Jiter::new(data);
    let peek = jiter.peek()?;
    let out = value(&mut jiter, peek, builder, 0, max_depth)?;
    jiter.finish()?;
    Ok(out)
}

/// Validates and discards values; depth is always checked. A strict walk
/// ([`SkipBuilder::strict`]) refuses duplicate member names like every other
/// walk; a lenient one ([`SkipBuilder::lenient`]) accepts them and tells a
/// callback every member name (used to recognise key material).
pub struct SkipBuilder<F = fn(&str)> {
    on_name: F,
    strict: bool,
}

impl SkipBuilder {
    pub fn strict() -> SkipBuilder {
        SkipBuilder {
            on_name: |_| {},
            strict: true,
        }
    }
}

impl<F: FnMut(&str)> SkipBuilder<F> {
    pub fn lenient(on_name: F) -> SkipBuilder<F> {
        SkipBuilder {
            on_name,
            strict: false,
        }
    }
}

impl<F: FnMut(&str)> Builder for SkipBuilder<F> {
    type Value = ();
    /// The name, kept only by a strict walk (for its duplicate check).
    type Key = Option<String>;
    type Object = HashSet<String>;

    fn null(&mut self) -> Result<()> {
        Ok(())
    }
    fn boolean(&mut self, _: bool) -> Result<()> {
        Ok(())
    }
    fn int(&mut self, _: i64) -> Result<()> {
        Ok(())
    }
    fn big_int(&mut self, _: &BigInt) -> Result<()> {
        Ok(())
    }
    fn float(&mut self, _: f64) -> Result<()> {
        Ok(())
    }
    fn string(&mut self, _: &str) -> Result<()> {
        Ok(())
    }
    fn array(&mut self, _: Items<()>) -> Result<()> {
        Ok(())
    }
    fn key(&mut self, name: &str, _: Option<usize>) -> Result<Option<String>> {
        (self.on_name)(name);
        Ok(self.strict.then(|| name.to_owned()))
    }
    fn object(&mut self) -> Result<HashSet<String>> {
        Ok(HashSet::new())
    }
    fn insert(
        &mut self,
        object: &mut HashSet<String>,
        key: Option<String>,
        (): (),
    ) -> Result<bool> {
        Ok(key.is_none_or(|key| object.insert(key)))
    }
    fn finish_object(&mut self, _: HashSet<String>) -> Result<()> {
        Ok(())
    }
}

/// A plain Rust JSON value (members keep their order).
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    /// An integer beyond 64 bits, kept exact as decimal text.
    BigInt(String),
    Float(f64),
    String(String),
    Array(Vec<Value>),
    Object(Vec<(String, Value)>),
}

impl Value {
    /// The member called `name` of an object.
    pub fn get(&self, name: &str) -> Option<&Value> {
        match self {
            Value::Object(members) => members.iter().find(|(k, _)| k == name).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// Parses a document strictly into a [`Value`].
    pub fn parse(data: &[u8], max_depth: usize) -> Result<Value> {
        document(data, &mut ValueBuilder, max_depth)
    }
}

/// Builds [`Value`]s.
pub struct ValueBuilder;

impl Builder for ValueBuilder {
    type Value = Value;
    type Key = String;
    /// Members in order, plus their names for a linear-time duplicate check.
    type Object = (Vec<(String, Value)>, HashSet<String>);

    fn null(&mut self) -> Result<Value> {
        Ok(Value::Null)
    }
    fn boolean(&mut self, value: bool) -> Result<Value> {
        Ok(Value::Bool(value))
    }
    fn int(&mut self, value: i64) -> Result<Value> {
        Ok(Value::Int(value))
    }
    fn big_int(&mut self, value: &BigInt) -> Result<Value> {
        // jiter may hand the i64 edges (2^63-1, -2^63) over as big integers.
        Ok(match i64::try_from(value) {
            Ok(small) => Value::Int(small),
            Err(_) => Value::BigInt(value.to_string()),
        })
    }
    fn float(&mut self, value: f64) -> Result<Value> {
        Ok(Value::Float(value))
    }
    fn string(&mut self, value: &str) -> Result<Value> {
        Ok(Value::String(value.to_owned()))
    }
    fn array(&mut self, items: Items<Value>) -> Result<Value> {
        Ok(Value::Array(items.into_vec()))
    }
    fn key(&mut self, name: &str, _: Option<usize>) -> Result<String> {
        Ok(name.to_owned())
    }
    fn object(&mut self) -> Result<Self::Object> {
        Ok((Vec::new(), HashSet::new()))
    }
    fn insert(&mut self, object: &mut Self::Object, key: String, value: Value) -> Result<bool> {
        if !object.1.insert(key.clone()) {
            return Ok(false);
        }
        object.0.push((key, value));
        Ok(true)
    }
    fn finish_object(&mut self, object: Self::Object) -> Result<Value> {
        Ok(Value::Object(object.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &[u8]) -> Result<Value> {
        Value::parse(text, 64)
    }

    #[test]
    fn decodes_every_type() {
        let v = parse(br#"{"a":null,"b":true,"c":-3,"d":1.5,"e":"x","f":[1,{}]}"#).unwrap();
        assert_eq!(v.get("a"), Some(&Value::Null));
        assert_eq!(v.get("b"), Some(&Value::Bool(true)));
        assert_eq!(v.get("c"), Some(&Value::Int(-3)));
        assert_eq!(v.get("d"), Some(&Value::Float(1.5)));
        assert_eq!(v.get("e").and_then(Value::as_str), Some("x"));
        assert_eq!(
            v.get("f"),
            Some(&Value::Array(vec![Value::Int(1), Value::Object(vec![])]))
        );
    }

    #[test]
    fn integers_stay_exact() {
        let v =
            parse(br#"[9223372036854775807,-9223372036854775808,18446744073709551616]"#).unwrap();
        assert_eq!(
            v,
            Value::Array(vec![
                Value::Int(i64::MAX),
                Value::Int(i64::MIN),
                Value::BigInt("18446744073709551616".into()),
            ])
        );
    }

    #[test]
    fn duplicate_members_are_refused_even_when_escaped() {
        let err = parse(br#"{"a":1,"a":2}"#).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Malformed);
        let err = parse(br#"{"a":1,"\u0061":2}"#).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Malformed);
        // Nested objects are checked too.
        assert!(parse(br#"{"o":{"k":1,"k":1}}"#).is_err());
    }

    #[test]
    fn depth_is_capped() {
        let deep = format!("{}{}", "[".repeat(65), "]".repeat(65));
        assert_eq!(
            parse(deep.as_bytes()).unwrap_err().kind(),
            ErrorKind::TooLarge
        );
        let ok = format!("{}{}", "[".repeat(64), "]".repeat(64));
        assert!(parse(ok.as_bytes()).is_ok());
    }

    #[test]
    fn refuses_non_json_and_bad_text() {
        for bad in [
            &b"NaN"[..],
            b"Infinity",
            b"[1,]",
            b"{\"a\":1} x",
            b"\"\\ud800\"",
            b"\"\\udc00\"",
            b"\"\xff\"",
            b"",
            b"'a'",
        ] {
            let err = parse(bad).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Malformed, "{bad:?}");
            assert_eq!(err.message(), "invalid JSON");
        }
    }

    #[test]
    fn non_finite_numbers_are_refused() {
        for bad in [&b"1e400"[..], b"-1e309", b"[1,{\"a\":2e308}]"] {
            assert_eq!(parse(bad).unwrap_err(), NON_FINITE, "{bad:?}");
        }
        assert_eq!(parse(b"1e308").unwrap(), Value::Float(1e308));
    }

    #[test]
    fn surrogate_pairs_decode() {
        assert_eq!(
            parse(br#""\ud83d\ude00""#).unwrap(),
            Value::String("\u{1F600}".into())
        );
    }
}
