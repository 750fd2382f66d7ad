//! The verified-token cache: a bounded map from a token's cache key (its
//! SHA-256 digest, or the token itself) to the value verified for it.
//!
//! Why it lives here and not in a Python `dict`: on free-threaded CPython
//! 3.13, a `dict` lookup from a thread other than the one that created the
//! stored key cannot take its lock-free path (the key's shared reference
//! count is zero, so the lookup falls back to the dict's lock, and
//! `dict.get` already holds that lock: ~20 µs a call). A table of bytes keyed
//! in Rust has no per-object ownership, so every thread reads it the same
//! way. See `docs/design-notes.md`, "Cache hits from pool threads".
//!
//! Reads take the table's read lock, which readers share: a hit never waits
//! for another hit, only for a store in progress (a few map operations, no
//! Python code). Stores evict first-in first-out, draining entries whose
//! deadline has passed before evicting live ones; nothing ever walks the
//! table. A value is served only while `stored_at <= now < deadline`.

use std::collections::hash_map::{DefaultHasher, RandomState};
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Expired entries drained from the front per store, at most.
const DRAIN: usize = 8;

struct Entry<V> {
    value: V,
    deadline: f64,
    stored_at: f64,
}

/// The map and its insertion order: one bounded FIFO table. The shared
/// [`Cache`] keeps one behind a lock; a thread may keep one of its own
/// (a [`Table`] used directly) as a read view that needs no lock at all.
pub struct Table<V> {
    map: HashMap<Box<[u8]>, Entry<V>, TailHash>,
    order: VecDeque<Box<[u8]>>,
    max_size: usize,
}

impl<V> Table<V> {
    /// An empty table holding at most `max_size` entries (at least one).
    pub fn new(max_size: usize) -> Self {
        Table {
            map: HashMap::default(),
            order: VecDeque::new(),
            max_size: max_size.max(1),
        }
    }

    /// The value under `key` with its `(deadline, stored_at)`, if it is
    /// valid at `now` (`stored_at <= now < deadline`).
    pub fn get(&self, key: &[u8], now: f64) -> Option<(&V, f64, f64)> {
        let entry = self.map.get(key)?;
        (entry.stored_at <= now && now < entry.deadline)
            .then_some((&entry.value, entry.deadline, entry.stored_at))
    }

    /// Stores `value` under `key` for `stored_at <= now < deadline`. Returns
    /// the values that left the table (evicted, replaced, or `value` itself
    /// when its deadline has already passed at `now`), for the caller to
    /// drop once nothing is borrowed.
    pub fn insert(
        &mut self,
        key: &[u8],
        value: V,
        deadline: f64,
        stored_at: f64,
        now: f64,
    ) -> Vec<V> {
        let mut gone = Vec::new();
        if deadline.is_nan() || deadline <= now {
            gone.push(value);
            return gone;
        }
        let Table {
            map,
            order,
            max_size,
        } = self;
        for _ in 0..DRAIN {
            let Some(front) = order.front() else { break };
            if map.get(front).is_some_and(|e| e.deadline > now) {
                break;
            }
            if let Some(old) = order.pop_front().and_then(|k| map.remove(&k)) {
                gone.push(old.value);
            }
        }
        while order.len() >= *max_size {
            if let Some(old) = order.pop_front().and_then(|k| map.remove(&k)) {
                gone.push(old.value);
            }
        }
        let entry = Entry {
            value,
            deadline,
            stored_at,
        };
        if let Some(slot) = map.get_mut(key) {
            // Stored again after its entry was drained from the order by a
            // racing store: refresh it in place, keep its one order slot.
            gone.push(std::mem::replace(slot, entry).value);
        } else {
            let key: Box<[u8]> = key.into();
            order.push_back(key.clone());
            map.insert(key, entry);
        }
        gone
    }

    /// Removes every entry; returns the values for the caller to drop.
    pub fn clear(&mut self) -> Vec<V> {
        self.order.clear();
        self.map.drain().map(|(_, e)| e.value).collect()
    }

    /// Entries stored.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// Bytes of a key that go into its hash: the last ones. A digest is hashed
/// whole; a raw token (`cache_key="token"`) by its signature's tail, which
/// only the key holder controls (rejected tokens are never stored), so
/// hashing 400+ bytes per hit buys nothing. Equality still compares keys
/// whole, and the hash is keyed (SipHash with random keys).
const HASHED_TAIL: usize = 32;

#[derive(Clone, Default)]
struct TailHash(RandomState);

impl BuildHasher for TailHash {
    type Hasher = TailHasher;

    fn build_hasher(&self) -> TailHasher {
        TailHasher(self.0.build_hasher())
    }
}

struct TailHasher(DefaultHasher);

impl Hasher for TailHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0
            .write(&bytes[bytes.len().saturating_sub(HASHED_TAIL)..]);
    }

    fn write_usize(&mut self, n: usize) {
        self.0.write_usize(n);
    }

    fn finish(&self) -> u64 {
        self.0.finish()
    }
}

/// A bounded, thread-safe map of cache keys to verified values.
pub struct Cache<V> {
    table: RwLock<Table<V>>,
    max_size: usize,
    /// Bumped by [`Cache::clear`], so per-thread views know to drop theirs.
    generation: AtomicU64,
}

impl<V> Cache<V> {
    /// An empty cache holding at most `max_size` entries (at least one).
    pub fn new(max_size: usize) -> Self {
        Cache {
            table: RwLock::new(Table::new(max_size)),
            max_size: max_size.max(1),
            generation: AtomicU64::new(0),
        }
    }

    fn read(&self) -> RwLockReadGuard<'_, Table<V>> {
        // Nothing panics while holding the lock; if something ever did, the
        // table is still consistent at every step, so keep using it.
        self.table.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, Table<V>> {
        self.table.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// The value stored under `key` if it is valid at `now`, passed through
    /// `read` with its `(deadline, stored_at)` (`read` must be quick: it
    /// runs under the read lock).
    pub fn get<R>(&self, key: &[u8], now: f64, read: impl FnOnce(&V, f64, f64) -> R) -> Option<R> {
        let table = self.read();
        let (value, deadline, stored_at) = table.get(key, now)?;
        Some(read(value, deadline, stored_at))
    }

    /// Stores `value` under `key` until `deadline`. Returns the values that
    /// left the cache (evicted, replaced, or `value` itself when its deadline
    /// has already passed), for the caller to drop after the lock is released.
    pub fn insert(&self, key: &[u8], value: V, deadline: f64, now: f64) -> Vec<V> {
        if deadline.is_nan() || deadline <= now {
            return vec![value];
        }
        self.write().insert(key, value, deadline, now, now)
    }

    /// For inspection (tests, diagnostics): `read(value, deadline, stored_at)`
    /// of the entry under `key`, whatever the time.
    pub fn entry<R>(&self, key: &[u8], read: impl FnOnce(&V, f64, f64) -> R) -> Option<R> {
        let table = self.read();
        let entry = table.map.get(key)?;
        Some(read(&entry.value, entry.deadline, entry.stored_at))
    }

    /// For inspection: the stored keys, oldest first.
    pub fn keys(&self) -> Vec<Box<[u8]>> {
        let table = self.read();
        table
            .order
            .iter()
            .filter(|k| table.map.contains_key(*k))
            .cloned()
            .collect()
    }

    /// Removes every entry and bumps the generation; returns the values for
    /// the caller to drop.
    pub fn clear(&self) -> Vec<V> {
        let gone = self.write().clear();
        self.generation.fetch_add(1, Ordering::Release);
        gone
    }

    /// How many times the cache was cleared: a view taken at another
    /// generation is stale.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Entries stored.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Length of the insertion order (bounded like the map).
    pub fn order_len(&self) -> usize {
        self.read().order.len()
    }

    /// The bound on the number of entries.
    pub fn max_size(&self) -> usize {
        self.max_size
    }
}

#[cfg(test)]
mod tests {
    use super::{Cache, Table};
    use std::sync::Arc;

    #[test]
    fn hit_only_inside_the_window() {
        let cache = Cache::new(4);
        assert!(cache.insert(b"k", 7, 20.0, 10.0).is_empty());
        assert_eq!(cache.get(b"k", 10.0, |v, _, _| *v), Some(7));
        assert_eq!(cache.get(b"k", 19.9, |v, _, _| *v), Some(7));
        assert_eq!(cache.get(b"k", 20.0, |v, _, _| *v), None, "deadline is exclusive");
        assert_eq!(
            cache.get(b"k", 9.0, |v, _, _| *v),
            None,
            "a clock gone back misses"
        );
        assert_eq!(cache.get(b"other", 10.0, |v, _, _| *v), None);
    }

    #[test]
    fn past_deadline_is_never_stored() {
        let cache = Cache::new(4);
        assert_eq!(cache.insert(b"k", 1, 10.0, 10.0), vec![1]);
        assert_eq!(cache.insert(b"k", 2, f64::NAN, 10.0), vec![2]);
        assert!(cache.is_empty());
    }

    #[test]
    fn fifo_eviction_keeps_the_bound() {
        let cache = Cache::new(3);
        for i in 0..10u8 {
            cache.insert(&[i], i, 100.0, 1.0);
            assert!(cache.len() <= 3 && cache.order_len() <= 3);
        }
        assert_eq!(cache.get(&[6], 2.0, |v, _, _| *v), None);
        assert_eq!(cache.get(&[7], 2.0, |v, _, _| *v), Some(7));
        assert_eq!(cache.get(&[9], 2.0, |v, _, _| *v), Some(9));
    }

    #[test]
    fn expired_entries_go_first() {
        let cache = Cache::new(3);
        cache.insert(b"old", 1, 5.0, 1.0);
        cache.insert(b"live", 2, 100.0, 1.0);
        // At 6.0 "old" has expired: the next store drains it, "live" stays.
        assert_eq!(cache.insert(b"new", 3, 100.0, 6.0), vec![1]);
        assert_eq!(cache.get(b"live", 6.0, |v, _, _| *v), Some(2));
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn storing_again_replaces_in_place() {
        let cache = Cache::new(3);
        cache.insert(b"k", 1, 50.0, 1.0);
        assert_eq!(cache.insert(b"k", 2, 60.0, 2.0), vec![1]);
        assert_eq!(cache.get(b"k", 55.0, |v, _, _| *v), Some(2));
        assert_eq!((cache.len(), cache.order_len()), (1, 1));
    }

    #[test]
    fn a_thread_view_is_a_table_without_a_lock() {
        let mut view = Table::new(2);
        assert!(view.insert(b"a", 1, 50.0, 5.0, 10.0).is_empty());
        assert_eq!(view.get(b"a", 4.0), None, "before it was stored");
        assert_eq!(view.get(b"a", 10.0).map(|(v, d, s)| (*v, d, s)), Some((1, 50.0, 5.0)));
        view.insert(b"b", 2, 50.0, 10.0, 10.0);
        assert_eq!(view.insert(b"c", 3, 50.0, 10.0, 10.0), vec![1]);
        assert_eq!(view.len(), 2);
        let mut gone = view.clear();
        gone.sort_unstable();
        assert_eq!(gone, vec![2, 3]);
    }

    #[test]
    fn clear_bumps_the_generation() {
        let cache = Cache::new(3);
        cache.insert(b"a", 1, 50.0, 1.0);
        assert_eq!(cache.generation(), 0);
        cache.clear();
        assert_eq!(cache.generation(), 1);
    }

    #[test]
    fn clear_returns_everything() {
        let cache = Cache::new(3);
        cache.insert(b"a", 1, 50.0, 1.0);
        cache.insert(b"b", 2, 50.0, 1.0);
        let mut gone = cache.clear();
        gone.sort_unstable();
        assert_eq!(gone, vec![1, 2]);
        assert!(cache.is_empty() && cache.order_len() == 0);
    }

    #[test]
    fn keys_sharing_a_tail_stay_apart() {
        let cache = Cache::new(8);
        let tail = [7u8; 40];
        let a = [b"a".as_slice(), &tail].concat();
        let b = [b"b".as_slice(), &tail].concat();
        cache.insert(&a, 1, 50.0, 1.0);
        cache.insert(&b, 2, 50.0, 1.0);
        assert_eq!(cache.get(&a, 2.0, |v, _, _| *v), Some(1));
        assert_eq!(cache.get(&b, 2.0, |v, _, _| *v), Some(2));
        assert_eq!(cache.get(&tail, 2.0, |v, _, _| *v), None);
    }

    #[test]
    fn many_threads_never_see_another_keys_value() {
        let cache = Arc::new(Cache::new(64));
        let workers: Vec<_> = (0..12u32)
            .map(|t| {
                let cache = Arc::clone(&cache);
                std::thread::spawn(move || {
                    for i in 0..5_000u32 {
                        let id = (t * 7 + i) % 200;
                        let key = id.to_le_bytes();
                        if let Some(v) = cache.get(&key, 1.0, |v, _, _| *v) {
                            assert_eq!(v, id);
                        } else {
                            cache.insert(&key, id, 100.0, 1.0);
                        }
                        assert!(cache.order_len() <= 64);
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        assert!(cache.len() <= 64);
    }
}
