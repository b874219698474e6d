//! Key encodings. Ids never contain `\0`, so it separates components; numbers are big-endian so
//! byte order is numeric order.

use super::{Result, StoreError};

/// Newest first: a smaller key for a later time.
pub fn recency(updated_at: u64) -> [u8; 8] {
    (u64::MAX - updated_at).to_be_bytes()
}

/// `id \0`, the prefix of every key owned by that id.
pub fn id_prefix(id: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(id.len() + 1);
    key.extend_from_slice(id.as_bytes());
    key.push(0);
    key
}

/// `id \0 n` with n big-endian.
pub fn seq_key(id: &str, n: u64) -> Vec<u8> {
    let mut key = id_prefix(id);
    key.extend_from_slice(&n.to_be_bytes());
    key
}

pub fn part_key(message_id: &str, index: u32) -> Vec<u8> {
    let mut key = id_prefix(message_id);
    key.extend_from_slice(&index.to_be_bytes());
    key
}

pub fn pair_key(a: &str, b: &str) -> Vec<u8> {
    let mut key = id_prefix(a);
    key.extend_from_slice(b.as_bytes());
    key
}

/// `project \0 recency \0 session`.
pub fn session_key(project_id: &str, updated_at: u64, session_id: &str) -> Vec<u8> {
    let mut key = id_prefix(project_id);
    key.extend_from_slice(&recency(updated_at));
    key.push(0);
    key.extend_from_slice(session_id.as_bytes());
    key
}

/// The text after the last `\0`.
pub fn last_component(key: &[u8]) -> String {
    let start = key.iter().rposition(|b| *b == 0).map_or(0, |i| i + 1);
    String::from_utf8_lossy(&key[start..]).into_owned()
}

/// The big-endian u64 a `seq_key` ends with.
pub fn trailing_u64(key: &[u8]) -> u64 {
    let mut buf = [0u8; 8];
    if key.len() >= 8 {
        buf.copy_from_slice(&key[key.len() - 8..]);
    }
    u64::from_be_bytes(buf)
}

/// Page cursors are the last key of the previous page, hex-encoded: opaque to clients.
pub struct Cursor;

impl Cursor {
    pub fn encode(key: &[u8]) -> String {
        hex::encode(key)
    }

    pub fn decode_opt(cursor: Option<&str>) -> Result<Option<Vec<u8>>> {
        match cursor {
            None => Ok(None),
            Some(c) => hex::decode(c).map(Some).map_err(|_| StoreError::BadCursor),
        }
    }
}
