//! `VerifyCall`: a verifier's `verify`, the one object a request calls.
//!
//! Why it exists: on free-threaded CPython every object that all threads
//! touch on every request costs an atomic reference-count update per touch
//! from every thread but its owner, and those updates bounce one cache line
//! between cores. A Python `verify` method touches the verifier, the
//! function, its frame's code and the bound cache method; a cache behind a
//! read-write lock adds the lock word; returning the one stored claims
//! object adds its count. Here a request touches one shared Python object
//! (this one, as the caller loads it) and reads two counters nobody writes
//! on the way:
//!
//! - the route (the cache with its engine) is swapped as a whole by
//!   `install` under a lock that requests never take: each thread keeps its
//!   own reference to the current route, checked against a generation
//!   counter that only `install` writes;
//! - each thread keeps a view of the cache (a [`Table`] of its own, no lock):
//!   a hit is a look-up there returning claims that thread built (around the
//!   stored payload, or when it verified the token itself), so their count
//!   is that thread's own. A miss in the view reads the shared table (one
//!   read lock) and fills the view; only a miss there verifies, and stores
//!   in the shared table alone (the view takes the result on the thread's
//!   next request for that token: new tokens pay for one table, not two).
//!
//! The view holds the same entries under the same rule as the shared table
//! (`stored_at <= now < deadline`, FIFO, at most `max_size`); a cleared
//! table or an installed route makes every view stale. Views of dropped
//! callers are pruned the next time their thread misses.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock, Weak};

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use super::cache::PyTokenCache;
use super::input_bytes;
use crate::cache::Table;
use crate::error::ErrorKind;

/// Ids of callers, so views never confuse two of them.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A thread keeps views of at most this many callers (pruned FIFO).
const VIEWS_PER_THREAD: usize = 16;

/// What every thread's view is checked against.
struct Shared {
    id: u64,
    /// Bumped by `install`: a view taken at another generation is stale.
    generation: AtomicU64,
    route: RwLock<Option<Py<PyTokenCache>>>,
}

/// One thread's view of one caller.
struct View {
    caller: Weak<Shared>,
    id: u64,
    generation: u64,
    table_generation: u64,
    route: Rc<Py<PyTokenCache>>,
    /// Claims built by this thread: `Py<PyAny>` owned by this thread.
    table: Table<Py<PyAny>>,
}

thread_local! {
    static VIEWS: RefCell<Vec<View>> = const { RefCell::new(Vec::new()) };
}

/// The route of this thread's current view of caller `id`, if it is fresh.
fn fresh_route(id: u64, generation: u64) -> Option<Rc<Py<PyTokenCache>>> {
    VIEWS
        .try_with(|views| {
            let views = views.try_borrow().ok()?;
            let view = views.iter().find(|v| v.id == id)?;
            let fresh = view.generation == generation
                && view.table_generation == view.route.get().table_generation();
            fresh.then(|| Rc::clone(&view.route))
        })
        .ok()
        .flatten()
}

/// This thread's own claims for `key`, if its view holds them at `now`.
fn view_hit(py: Python<'_>, id: u64, key: &[u8], now: f64) -> Option<Py<PyAny>> {
    VIEWS
        .try_with(|views| {
            let views = views.try_borrow().ok()?;
            let view = views.iter().find(|v| v.id == id)?;
            view.table.get(key, now).map(|(c, _, _)| c.clone_ref(py))
        })
        .ok()
        .flatten()
}

/// Remembers `claims` in this thread's view of caller `id` (if that view is
/// still the one for `route`). Whatever leaves the view is returned, to be
/// dropped once nothing is borrowed (dropping runs Python code).
fn view_store(
    id: u64,
    route: &Rc<Py<PyTokenCache>>,
    key: &[u8],
    claims: Py<PyAny>,
    times: (f64, f64, f64),
) -> Vec<Py<PyAny>> {
    let (deadline, stored_at, now) = times;
    VIEWS
        .try_with(|views| {
            let Ok(mut views) = views.try_borrow_mut() else {
                return vec![claims];
            };
            match views
                .iter_mut()
                .find(|v| v.id == id && Rc::ptr_eq(&v.route, route))
            {
                Some(view) => view.table.insert(key, claims, deadline, stored_at, now),
                None => vec![claims],
            }
        })
        .unwrap_or_default()
}

/// Replaces this thread's view of `shared` by an empty one on `route`, and
/// drops the views of callers that no longer exist. Returns what left.
fn view_reset(shared: &Arc<Shared>, generation: u64, route: Rc<Py<PyTokenCache>>) -> Vec<View> {
    VIEWS
        .try_with(|views| {
            let Ok(mut views) = views.try_borrow_mut() else {
                return Vec::new();
            };
            let mut gone = Vec::new();
            let mut index = 0;
            while index < views.len() {
                let view = &views[index];
                if view.id == shared.id || view.caller.strong_count() == 0 {
                    gone.push(views.remove(index));
                } else {
                    index += 1;
                }
            }
            if views.len() >= VIEWS_PER_THREAD {
                gone.push(views.remove(0));
            }
            let cache = route.get();
            let table_generation = cache.table_generation();
            // A route on the same table (keys were only added) keeps the
            // entries this thread already holds, unless the table was cleared.
            let kept = gone.iter_mut().find(|v| {
                v.id == shared.id
                    && v.table_generation == table_generation
                    && v.route.get().same_table(cache)
            });
            let table = kept.map_or_else(
                || Table::new(cache.bound()),
                |v| std::mem::replace(&mut v.table, Table::new(1)),
            );
            views.push(View {
                caller: Arc::downgrade(shared),
                id: shared.id,
                generation,
                table_generation,
                route,
                table,
            });
            gone
        })
        .unwrap_or_default()
}

/// `verify(token, /, *, now=None) -> Claims`: one verifier's entry point.
///
/// Verify ``token`` and return its claims.
///
/// Safe from any number of threads. A reference taken once
/// (``check = verifier.verify``) follows ``rotate()`` like the attribute.
///
/// Args:
///     token: the compact JWS, as ``str`` or ``bytes`` (without the
///         ``Bearer`` scheme of an ``Authorization`` header).
///     now: the time to check against, in seconds since the epoch;
///         defaults to the verifier's clock.
///
/// Raises:
///     TokenRejectedError: the token is refused (a subclass names why).
#[pyclass(frozen, module = "grelmicro_core._core", name = "VerifyCall")]
pub struct PyVerifyCall {
    shared: Arc<Shared>,
    /// The time when no `now=` is given.
    clock: Py<PyAny>,
    /// `refuse(error, now)`: raises what the caller should see instead of
    /// `error` (the translated rejection); called on every failure.
    refuse: Py<PyAny>,
    /// What `inspect.signature` reports (frameworks read it).
    signature: Py<PyAny>,
}

impl PyVerifyCall {
    fn route(&self, py: Python<'_>, generation: u64) -> PyResult<Rc<Py<PyTokenCache>>> {
        if let Some(route) = fresh_route(self.shared.id, generation) {
            return Ok(route);
        }
        let current = self
            .shared
            .route
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|r| r.clone_ref(py))
            .ok_or_else(|| PyTypeError::new_err("VerifyCall has no route installed"))?;
        let route = Rc::new(current);
        drop(view_reset(&self.shared, generation, Rc::clone(&route)));
        Ok(route)
    }

    fn run(
        &self,
        py: Python<'_>,
        token: &Bound<'_, PyAny>,
        now: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let now: f64 = match now {
            Some(now) => now.extract()?,
            None => self.clock.bind(py).call0()?.extract()?,
        };
        let generation = self.shared.generation.load(Ordering::Acquire);
        let route = self.route(py, generation)?;
        let cache = route.get();
        if !cache.enabled() {
            return Ok(cache.verify_only(token, now)?.unbind());
        }
        let bytes = input_bytes(token, ErrorKind::Malformed, "token")?;
        let key = cache.key(bytes)?;
        let key = key.as_ref();
        if let Some(hit) = view_hit(py, self.shared.id, key, now) {
            cache.count(false);
            return Ok(hit);
        }
        // A miss in the view: the shared table. A result this thread stored
        // comes back as the object it built; another thread's payload gets
        // claims of this thread's own. Either goes into the view.
        if let Some(hit) = cache.shared_hit(py, key, now) {
            cache.count(false);
            let claims = match hit.own {
                Some(own) => own.into_bound(py),
                None => cache.wrap(hit.payload.bind(py))?,
            };
            let times = (hit.deadline, hit.stored_at, now);
            drop(view_store(
                self.shared.id,
                &route,
                key,
                claims.clone().unbind(),
                times,
            ));
            return Ok(claims.unbind());
        }
        // A miss: verify and store in the shared table only. The view takes
        // the result on this thread's next request for the token, so a
        // stream of new tokens pays for no second table.
        cache.count(true);
        Ok(cache.verify_and_store(token, key, now)?.0.unbind())
    }
}

#[pymethods]
impl PyVerifyCall {
    #[new]
    #[pyo3(signature = (route, *, clock, refuse, signature))]
    fn new(
        route: Py<PyTokenCache>,
        clock: Py<PyAny>,
        refuse: Py<PyAny>,
        signature: Py<PyAny>,
    ) -> Self {
        PyVerifyCall {
            shared: Arc::new(Shared {
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                generation: AtomicU64::new(0),
                route: RwLock::new(Some(route)),
            }),
            clock,
            refuse,
            signature,
        }
    }

    /// Verify ``token`` and return its claims (see the class documentation).
    #[pyo3(signature = (token, /, *, now=None))]
    fn __call__(
        &self,
        py: Python<'_>,
        token: &Bound<'_, PyAny>,
        now: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.run(py, token, now).map_err(|error| {
            let now = now.map_or_else(|| py.None(), |n| n.clone().unbind());
            match self.refuse.bind(py).call1((error.value(py), now)) {
                Err(raised) => raised,
                Ok(_) => error,
            }
        })
    }

    /// Makes `route` the one every later call uses (from any thread).
    fn install(&self, route: Py<PyTokenCache>) {
        let old = {
            let mut current = self
                .shared
                .route
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            let old = current.replace(route);
            self.shared.generation.fetch_add(1, Ordering::Release);
            old
        };
        drop(old);
    }

    /// The signature frameworks see (``inspect.signature`` reads it).
    #[getter]
    fn __signature__(&self, py: Python<'_>) -> Py<PyAny> {
        self.signature.clone_ref(py)
    }

    /// For tests: entries in the calling thread's view (None: no fresh view).
    #[cfg(feature = "test-hooks")]
    fn _view_len(&self) -> Option<usize> {
        let generation = self.shared.generation.load(Ordering::Acquire);
        fresh_route(self.shared.id, generation)?;
        VIEWS
            .try_with(|views| {
                let views = views.try_borrow().ok()?;
                Some(views.iter().find(|v| v.id == self.shared.id)?.table.len())
            })
            .ok()
            .flatten()
    }

    fn __repr__(&self) -> String {
        format!(
            "<grelmicro verify(token, /, *, now=None) #{}>",
            self.shared.id
        )
    }
}

impl Drop for PyVerifyCall {
    fn drop(&mut self) {
        // This thread's view goes now; other threads prune theirs on a miss.
        let id = self.shared.id;
        let gone: Vec<View> = VIEWS
            .try_with(|views| {
                views.try_borrow_mut().map_or_else(
                    |_| Vec::new(),
                    |mut views| {
                        let (gone, kept) = views.drain(..).partition(|v| v.id == id);
                        *views = kept;
                        gone
                    },
                )
            })
            .unwrap_or_default();
        drop(gone);
    }
}
