//! Logical tables inside one fjall keyspace: every key starts with the table's one-byte tag.
//!
//! fjall creates each keyspace with its own LSM tree, and creating one costs tens of
//! milliseconds (a write to its meta tree and maintenance); thirteen of them made a first start
//! take most of a second. One keyspace with tagged tables keeps start-up short and still gives each
//! record type its own key space.

use std::ops::Bound;

use fjall::UserValue;

use super::handle::{Batch, Handle};
use super::{Result, StoreError};

/// One table: a tag and the database it lives in. Keys given to and returned by its methods are
/// without the tag.
#[derive(Clone)]
pub struct Table {
    handle: Handle,
    tag: u8,
}

/// An entry of a scan: the key without its tag, and the value.
pub type Entry = (Vec<u8>, UserValue);

/// A scan's iterator: entries in key order, or the one error that stopped it.
pub type Scan = Box<dyn DoubleEndedIterator<Item = Result<Entry>> + Send>;

impl Table {
    pub(super) fn new(handle: &Handle, tag: u8) -> Table {
        Table {
            handle: handle.clone(),
            tag,
        }
    }

    fn full(&self, key: &[u8]) -> Vec<u8> {
        let mut full = Vec::with_capacity(key.len() + 1);
        full.push(self.tag);
        full.extend_from_slice(key);
        full
    }

    pub fn get<K: AsRef<[u8]>>(&self, key: K) -> Result<Option<UserValue>> {
        Ok(self.handle.keyspace()?.get(self.full(key.as_ref()))?)
    }

    pub fn insert<K: AsRef<[u8]>, V: AsRef<[u8]>>(&self, key: K, value: V) -> Result<()> {
        let key = self.full(key.as_ref());
        self.handle
            .write(|open| open.ks.insert(key, value.as_ref()))
    }

    pub fn batch_insert<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        batch: &mut Batch,
        key: K,
        value: V,
    ) {
        batch
            .inner
            .insert(&batch.ks, self.full(key.as_ref()), value.as_ref());
    }

    pub fn batch_remove<K: AsRef<[u8]>>(&self, batch: &mut Batch, key: K) {
        batch.inner.remove(&batch.ks, self.full(key.as_ref()));
    }

    /// Number of entries (a scan: for start-up counts, not hot paths).
    pub fn len(&self) -> Result<usize> {
        let mut n = 0;
        for guard in self.handle.keyspace()?.prefix([self.tag]) {
            guard.key()?;
            n += 1;
        }
        Ok(n)
    }

    fn scan(&self, iter: Result<fjall::Iter>) -> Scan {
        match iter {
            Ok(iter) => Box::new(iter.map(|guard| -> Result<Entry> {
                let (key, value) = guard.into_inner()?;
                Ok((key.get(1..).unwrap_or_default().to_vec(), value))
            })),
            Err(e) => Box::new(std::iter::once(Err::<Entry, StoreError>(e))),
        }
    }

    /// Entries whose key starts with `prefix`, in key order (reversible).
    pub fn prefix(&self, prefix: &[u8]) -> Scan {
        let full = self.full(prefix);
        self.scan(self.handle.keyspace().map(|ks| ks.prefix(full)))
    }

    /// Entries with `start <= key <= end`, in key order.
    pub fn range(&self, start: &[u8], end: &[u8]) -> Scan {
        let range = self.full(start)..=self.full(end);
        self.scan(self.handle.keyspace().map(|ks| ks.range(range)))
    }

    /// Entries with a key strictly after `after` (or all, when None), in key order.
    pub fn after(&self, after: Option<&[u8]>) -> Scan {
        let start = match after {
            Some(key) => Bound::Excluded(self.full(key)),
            None => Bound::Included(vec![self.tag]),
        };
        let end = match self.tag.checked_add(1) {
            Some(next) => Bound::Excluded(vec![next]),
            None => Bound::Unbounded,
        };
        self.scan(
            self.handle
                .keyspace()
                .map(|ks| ks.range::<Vec<u8>, _>((start, end))),
        )
    }
}
