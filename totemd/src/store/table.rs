//! Logical tables inside one fjall keyspace: every key starts with the table's one-byte tag.
//!
//! fjall creates each keyspace with its own LSM tree, and creating one costs tens of
//! milliseconds (a write to its meta tree and maintenance); thirteen of them made a first start
//! take most of a second. One keyspace with tagged tables keeps start-up short and still gives each
//! record type its own key space.

use std::ops::Bound;

use fjall::{Keyspace, OwnedWriteBatch, UserValue};

/// One table: a tag and the keyspace it lives in. Keys given to and returned by its methods are
/// without the tag.
#[derive(Clone)]
pub struct Table {
    ks: Keyspace,
    tag: u8,
}

/// An entry of a scan: the key without its tag, and the value.
pub type Entry = (Vec<u8>, UserValue);

impl Table {
    pub fn new(ks: &Keyspace, tag: u8) -> Table {
        Table {
            ks: ks.clone(),
            tag,
        }
    }

    fn full(&self, key: &[u8]) -> Vec<u8> {
        let mut full = Vec::with_capacity(key.len() + 1);
        full.push(self.tag);
        full.extend_from_slice(key);
        full
    }

    pub fn get<K: AsRef<[u8]>>(&self, key: K) -> fjall::Result<Option<UserValue>> {
        self.ks.get(self.full(key.as_ref()))
    }

    pub fn insert<K: AsRef<[u8]>, V: AsRef<[u8]>>(&self, key: K, value: V) -> fjall::Result<()> {
        self.ks.insert(self.full(key.as_ref()), value.as_ref())
    }

    pub fn batch_insert<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        batch: &mut OwnedWriteBatch,
        key: K,
        value: V,
    ) {
        batch.insert(&self.ks, self.full(key.as_ref()), value.as_ref());
    }

    pub fn batch_remove<K: AsRef<[u8]>>(&self, batch: &mut OwnedWriteBatch, key: K) {
        batch.remove(&self.ks, self.full(key.as_ref()));
    }

    /// Number of entries (a scan: for start-up counts, not hot paths).
    pub fn len(&self) -> fjall::Result<usize> {
        let mut n = 0;
        for guard in self.ks.prefix([self.tag]) {
            guard.key()?;
            n += 1;
        }
        Ok(n)
    }

    fn strip(&self, guard: fjall::Guard) -> fjall::Result<Entry> {
        let (key, value) = guard.into_inner()?;
        Ok((key.get(1..).unwrap_or_default().to_vec(), value))
    }

    /// Entries whose key starts with `prefix`, in key order (reversible).
    pub fn prefix<'a>(
        &'a self,
        prefix: &[u8],
    ) -> impl DoubleEndedIterator<Item = fjall::Result<Entry>> + 'a {
        self.ks.prefix(self.full(prefix)).map(|g| self.strip(g))
    }

    /// Entries with `start <= key <= end`, in key order.
    pub fn range<'a>(
        &'a self,
        start: &[u8],
        end: &[u8],
    ) -> impl DoubleEndedIterator<Item = fjall::Result<Entry>> + 'a {
        self.ks
            .range(self.full(start)..=self.full(end))
            .map(|g| self.strip(g))
    }

    /// Entries with a key strictly after `after` (or all, when None), in key order.
    pub fn after<'a>(
        &'a self,
        after: Option<&[u8]>,
    ) -> impl Iterator<Item = fjall::Result<Entry>> + 'a {
        let start = match after {
            Some(key) => Bound::Excluded(self.full(key)),
            None => Bound::Included(vec![self.tag]),
        };
        let end = match self.tag.checked_add(1) {
            Some(next) => Bound::Excluded(vec![next]),
            None => Bound::Unbounded,
        };
        self.ks
            .range::<Vec<u8>, _>((start, end))
            .map(|g| self.strip(g))
    }
}
