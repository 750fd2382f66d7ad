//! `TokenCache`: the verified-token cache (`crate::cache`) around an engine.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyType;

use super::input_bytes;
use super::raw::SlotClass;
use super::verifier::PyVerifier;
use crate::cache::Cache;
use crate::error::ErrorKind;
use crate::{digest, token};

/// The verified-token cache (`cache.rs`), keyed by the token's SHA-256
/// digest or by the token itself. `verify(token, now)` is the whole request
/// in one call: a hit returns the stored claims; a miss calls the engine's
/// `verify_until(token, now) -> (payload, valid_until)` and the claims
/// type, stores the result until its deadline and returns it, with the key
/// computed once. The engine says until when its answer holds (its policy's
/// rules: `exp`, `max_age`); the cache only adds its TTL.
#[pyclass(frozen, module = "grelmicro_core._core", name = "TokenCache")]
pub struct PyTokenCache {
    inner: Arc<Cache<Stored>>,
    /// False for `max_size=0`: `verify` only verifies.
    enabled: bool,
    digest_key: bool,
    max_token_size: usize,
    ttl: f64,
    /// `(engine.verify_until, claims type)`, when built for `verify`.
    paths: Option<(Py<PyAny>, ClaimsType)>,
    /// The engine when it is this module's `Verifier`: called directly.
    core: Option<Py<PyVerifier>>,
    /// Called by `verify` for the time when none is given (the caller's
    /// clock, `time.time` by default: the core itself reads no clock).
    clock: Option<Py<PyAny>>,
    /// `[hits, misses]` when counting was asked for.
    counts: Option<Arc<[AtomicU64; 2]>>,
}

/// A cached result: the claims object and the payload it was built from
/// (a thread's view wraps the payload in claims of its own).
pub(super) struct Stored {
    claims: Py<PyAny>,
    payload: Py<PyAny>,
    /// The thread that built `claims` (see [`thread_tag`]).
    owner: u64,
}

/// A number for the calling thread, unique for the process's life.
pub(super) fn thread_tag() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static TAG: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    TAG.try_with(|tag| *tag).unwrap_or(0)
}

/// A shared hit, as the calling thread may serve it.
pub(super) struct SharedHit {
    /// The stored payload, to build this thread's own claims around.
    pub(super) payload: Py<PyAny>,
    /// The stored claims, when this thread built them (it owns their count).
    pub(super) own: Option<Py<PyAny>>,
    pub(super) deadline: f64,
    pub(super) stored_at: f64,
}

/// A token's cache key: its SHA-256 digest, or the token's own bytes.
pub(super) enum CacheKey<'a> {
    Digest([u8; 32]),
    Token(&'a [u8]),
}

impl AsRef<[u8]> for CacheKey<'_> {
    fn as_ref(&self) -> &[u8] {
        match self {
            CacheKey::Digest(digest) => digest,
            CacheKey::Token(bytes) => bytes,
        }
    }
}

/// How claims are built around a verified payload.
pub(super) enum ClaimsType {
    /// `claims(payload)`.
    Call(Py<PyAny>),
    /// A class whose instances keep the payload in one slot, made without
    /// running its `__init__` (~1,400 fewer instructions a verification than
    /// the call, under callgrind on 3.12: docs/design-notes.md); the payload
    /// is stored as built (read-only).
    Slot(SlotClass),
}

impl ClaimsType {
    fn new(py: Python<'_>, claims: Py<PyAny>, slot: Option<&str>) -> PyResult<ClaimsType> {
        let Some(slot) = slot else {
            return Ok(ClaimsType::Call(claims));
        };
        let class = claims
            .bind(py)
            .cast::<PyType>()
            .map_err(|_| PyTypeError::new_err("claims_slot needs claims to be a class"))?;
        Ok(ClaimsType::Slot(SlotClass::new(class, slot)?))
    }

    /// Claims around `payload`.
    pub(super) fn build<'py>(&self, payload: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        match self {
            ClaimsType::Call(claims) => claims.bind(payload.py()).call1((payload,)),
            ClaimsType::Slot(class) => class.make(payload),
        }
    }

    fn clone_ref(&self, py: Python<'_>) -> ClaimsType {
        match self {
            ClaimsType::Call(claims) => ClaimsType::Call(claims.clone_ref(py)),
            ClaimsType::Slot(class) => ClaimsType::Slot(class.clone_ref(py)),
        }
    }
}

/// The core `Verifier` behind a bound `verify` method, if that is what it is.
fn core_of(verify: &Bound<'_, PyAny>) -> Option<Py<PyVerifier>> {
    let engine = verify.getattr("__self__").ok()?;
    engine.cast_into::<PyVerifier>().ok().map(Bound::unbind)
}

impl PyTokenCache {
    /// The engine's `verify_until(token, now) -> (payload, valid_until)`:
    /// the core's own verifier directly, anything else (the network key
    /// router) through Python.
    fn engine_verify<'py>(
        &self,
        verify: &Py<PyAny>,
        token: &Bound<'py, PyAny>,
        now: f64,
    ) -> PyResult<(Bound<'py, PyAny>, Option<f64>)> {
        let py = token.py();
        match &self.core {
            Some(core) => {
                let (payload, valid_until) = core.get().check(py, token, now)?;
                Ok((payload.into_any(), valid_until))
            }
            None => verify.bind(py).call1((token, now))?.extract(),
        }
    }

    /// The cache key of a token's bytes, after the verifier's size cap.
    pub(super) fn key<'a>(&self, bytes: &'a [u8]) -> PyResult<CacheKey<'a>> {
        if bytes.len() > self.max_token_size {
            return Err(token::too_large(bytes.len(), self.max_token_size).into());
        }
        Ok(if self.digest_key {
            CacheKey::Digest(digest::sha256(bytes))
        } else {
            CacheKey::Token(bytes)
        })
    }

    /// Runs `f` on the cache key of `token`, after the verifier's size cap.
    fn with_key<R>(&self, token: &Bound<'_, PyAny>, f: impl FnOnce(&[u8]) -> R) -> PyResult<R> {
        let bytes = input_bytes(token, ErrorKind::Malformed, "token")?;
        Ok(f(self.key(bytes)?.as_ref()))
    }

    /// Whether results are cached at all (`max_size > 0`).
    pub(super) fn enabled(&self) -> bool {
        self.enabled
    }

    /// The bound on entries, which a thread's view shares.
    pub(super) fn bound(&self) -> usize {
        self.inner.max_size()
    }

    /// Whether `other` serves from the same table (a `rebind` of this one).
    pub(super) fn same_table(&self, other: &PyTokenCache) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Bumped whenever the shared table is cleared.
    pub(super) fn table_generation(&self) -> u64 {
        self.inner.generation()
    }

    fn paths(&self) -> PyResult<&(Py<PyAny>, ClaimsType)> {
        self.paths
            .as_ref()
            .ok_or_else(|| PyTypeError::new_err("TokenCache built without verify= and claims="))
    }

    /// `(payload, deadline, stored_at)` of the entry valid at `now`.
    pub(super) fn shared_hit(&self, py: Python<'_>, key: &[u8], now: f64) -> Option<SharedHit> {
        let me = thread_tag();
        self.inner
            .get(key, now, |stored, deadline, stored_at| SharedHit {
                payload: stored.payload.clone_ref(py),
                own: (stored.owner == me && me != 0).then(|| stored.claims.clone_ref(py)),
                deadline,
                stored_at,
            })
    }

    /// Claims of this cache's claims type around a stored payload.
    pub(super) fn wrap<'py>(&self, payload: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        self.paths()?.1.build(payload)
    }

    /// The miss: the engine verifies `token` (its errors propagate, nothing
    /// is stored), the claims are built and stored under `key` until their
    /// deadline, which is returned with them (None: not stored).
    pub(super) fn verify_and_store<'py>(
        &self,
        token: &Bound<'py, PyAny>,
        key: &[u8],
        now: f64,
    ) -> PyResult<(Bound<'py, PyAny>, Option<f64>)> {
        let (verify, claims_type) = self.paths()?;
        let (payload, valid_until) = self.engine_verify(verify, token, now)?;
        let claims = claims_type.build(&payload)?;
        let deadline = self.deadline(valid_until, now);
        if let Some(deadline) = deadline {
            let stored = Stored {
                claims: claims.clone().unbind(),
                payload: payload.unbind(),
                owner: thread_tag(),
            };
            // What left the cache is dropped here, after the lock is released.
            drop(self.inner.insert(key, stored, deadline, now));
        }
        Ok((claims, deadline))
    }

    /// No cache: `claims(verify(token, now))`.
    pub(super) fn verify_only<'py>(
        &self,
        token: &Bound<'py, PyAny>,
        now: f64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (verify, claims_type) = self.paths()?;
        let (payload, _) = self.engine_verify(verify, token, now)?;
        claims_type.build(&payload)
    }

    pub(super) fn count(&self, miss: bool) {
        if let Some(counts) = &self.counts {
            counts[usize::from(miss)].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// When verified claims stop being served: the engine's `valid_until`
    /// or `now + ttl`, whichever comes first; None (never stored) when the
    /// engine gave no end (no `exp`) or it is not after `now`.
    fn deadline(&self, valid_until: Option<f64>, now: f64) -> Option<f64> {
        let valid_until = valid_until?;
        // Written as the condition that must hold: a NaN is never stored.
        (valid_until > now).then(|| valid_until.min(now + self.ttl))
    }
}

#[pymethods]
impl PyTokenCache {
    #[new]
    #[pyo3(signature = (
        max_size, *, digest_key, max_token_size, ttl, verify=None, claims=None,
        claims_slot=None, clock=None, count=false
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        max_size: usize,
        digest_key: bool,
        max_token_size: usize,
        ttl: f64,
        verify: Option<Py<PyAny>>,
        claims: Option<Py<PyAny>>,
        claims_slot: Option<&str>,
        clock: Option<Py<PyAny>>,
        count: bool,
    ) -> PyResult<Self> {
        let claims = claims
            .map(|c| ClaimsType::new(py, c, claims_slot))
            .transpose()?;
        Ok(PyTokenCache {
            inner: Arc::new(Cache::new(max_size)),
            enabled: max_size > 0,
            digest_key,
            max_token_size,
            ttl,
            core: verify.as_ref().and_then(|v| core_of(v.bind(py))),
            paths: verify.zip(claims),
            clock,
            counts: count.then(|| Arc::new([AtomicU64::new(0), AtomicU64::new(0)])),
        })
    }

    /// A cache sharing this one's entries and counts, whose misses call
    /// `verify` (an engine's `verify_until`; keys were added: everything
    /// cached stays valid).
    fn rebind(&self, py: Python<'_>, verify: Py<PyAny>) -> Self {
        let core = core_of(verify.bind(py));
        PyTokenCache {
            inner: Arc::clone(&self.inner),
            enabled: self.enabled,
            digest_key: self.digest_key,
            max_token_size: self.max_token_size,
            ttl: self.ttl,
            paths: self
                .paths
                .as_ref()
                .map(|(_, claims)| (verify, claims.clone_ref(py))),
            core,
            clock: self.clock.as_ref().map(|c| c.clone_ref(py)),
            counts: self.counts.clone(),
        }
    }

    /// The claims for `token` at `now`: from the cache, else verified by the
    /// engine (its errors propagate; nothing is stored then) and stored.
    /// With `max_size=0` nothing is cached: `claims(verify(token, now))`.
    /// Without `now`, the time comes from `clock()`.
    #[pyo3(signature = (token, now=None))]
    fn verify(
        &self,
        py: Python<'_>,
        token: &Bound<'_, PyAny>,
        now: Option<f64>,
    ) -> PyResult<Py<PyAny>> {
        self.paths()?;
        let now = match (now, &self.clock) {
            (Some(now), _) => now,
            (None, Some(clock)) => clock.bind(py).call0()?.extract()?,
            (None, None) => return Err(PyTypeError::new_err("no now= and no clock")),
        };
        if !self.enabled {
            return Ok(self.verify_only(token, now)?.unbind());
        }
        let bytes = input_bytes(token, ErrorKind::Malformed, "token")?;
        let key = self.key(bytes)?;
        if let Some(hit) = self
            .inner
            .get(key.as_ref(), now, |v, _, _| v.claims.clone_ref(py))
        {
            self.count(false);
            return Ok(hit);
        }
        self.count(true);
        Ok(self.verify_and_store(token, key.as_ref(), now)?.0.unbind())
    }

    /// The value stored for `token` if `stored_at <= now < deadline`, else
    /// None. A token that is not str/bytes or is over the size cap raises.
    fn get(
        &self,
        py: Python<'_>,
        token: &Bound<'_, PyAny>,
        now: f64,
    ) -> PyResult<Option<Py<PyAny>>> {
        self.with_key(token, |key| {
            self.inner.get(key, now, |v, _, _| v.claims.clone_ref(py))
        })
    }

    /// Remembers `value`, verified from `payload`, for `token` until the
    /// engine's `valid_until` or the TTL, whichever is first (see `verify`).
    fn store(
        &self,
        token: &Bound<'_, PyAny>,
        value: Py<PyAny>,
        payload: &Bound<'_, PyAny>,
        valid_until: Option<f64>,
        now: f64,
    ) -> PyResult<()> {
        let Some(deadline) = self.deadline(valid_until, now) else {
            return Ok(());
        };
        let stored = Stored {
            claims: value,
            payload: payload.clone().unbind(),
            owner: 0,
        };
        drop(self.with_key(token, |key| self.inner.insert(key, stored, deadline, now))?);
        Ok(())
    }

    /// Drops every entry.
    fn clear(&self) {
        drop(self.inner.clear());
    }

    /// `(hits, misses)` of `verify` when built with `count=True`, else None.
    #[getter]
    fn counts(&self) -> Option<(u64, u64)> {
        self.counts
            .as_ref()
            .map(|c| (c[0].load(Ordering::Relaxed), c[1].load(Ordering::Relaxed)))
    }

    /// For tests: `(deadline, value, stored_at)` stored for `token`, or None.
    #[cfg(feature = "test-hooks")]
    fn _entry(
        &self,
        py: Python<'_>,
        token: &Bound<'_, PyAny>,
    ) -> PyResult<Option<(f64, Py<PyAny>, f64)>> {
        self.with_key(token, |key| {
            self.inner.entry(key, |v, deadline, stored_at| {
                (deadline, v.claims.clone_ref(py), stored_at)
            })
        })
    }

    /// For tests: the stored keys (digests, or token bytes), oldest first.
    #[cfg(feature = "test-hooks")]
    fn _keys<'py>(&self, py: Python<'py>) -> Vec<Bound<'py, pyo3::types::PyBytes>> {
        self.inner
            .keys()
            .iter()
            .map(|k| pyo3::types::PyBytes::new(py, k))
            .collect()
    }

    /// For tests: length of the insertion order (bounded like the entries).
    #[cfg(feature = "test-hooks")]
    #[getter]
    fn _order_length(&self) -> usize {
        self.inner.order_len()
    }

    /// The bound on the number of entries.
    #[getter]
    fn max_size(&self) -> usize {
        self.inner.max_size()
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }
}
