//! Damaged journals. fjall replays its journal (`store/N.jnl`) at open and stops at the first batch
//! it cannot read: a checksum that does not match refuses the whole store, and a damaged entry
//! header makes it cut the file there, dropping every batch after it without a word. So before
//! fjall opens the store, each journal is read here, batch by batch, checking what fjall checks.
//! When one is damaged, a copy of the journals goes beside the store, the journal is rewritten
//! with every whole batch (those after the damage too), and what could not be read is described:
//! the sessions it touched and when it was written.
//!
//! The format (fjall 3, `journal/entry.rs`): a batch is a start entry (tag 1, item count u32,
//! seqno u64), that many items (tag 2, value type u8, compression u8, keyspace u64, key length
//! u16, value length u32, stored length u32, key, value) or clears (tag 4, keyspace u64), and an
//! end entry (tag 3, xxh3 of the item bytes u64, "FJL\x03"). Integers are little-endian. A new
//! journal is preallocated with zeros; the data ends where they start.

use std::collections::BTreeSet;
use std::hash::Hasher;
use std::io::Write;
use std::path::{Path, PathBuf};

const START: u8 = 1;
const ITEM: u8 = 2;
const END: u8 = 3;
const CLEAR: u8 = 4;
const MAGIC: &[u8] = b"FJL\x03";
/// Zeros this long after the last batch mean the rest of the file is the preallocated tail.
const ZERO_RUN: usize = 4096;

/// What a damaged journal lost, found at open.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Repair {
    /// Where the damaged journals were copied.
    pub copy: PathBuf,
    /// Journals that were rewritten, and table files that lost blocks.
    pub files: Vec<String>,
    /// Table files that were damaged (the store was rebuilt from what they still hold).
    pub tables: Vec<String>,
    /// Stretches of bytes that could not be read.
    pub regions: usize,
    /// Bytes dropped.
    pub bytes: u64,
    /// Whole batches kept (after the damage included).
    pub kept: usize,
    /// Ids found in what was lost (`ses_…`, `msg_…`, `run_…`).
    pub ids: BTreeSet<String>,
    /// Earliest time (Unix ms) what was lost was written, when it can be told.
    pub from: Option<u64>,
    /// Latest time (Unix ms) what was lost was written, when it can be told.
    pub to: Option<u64>,
}

/// Why a batch at some offset is not whole.
#[derive(Debug, PartialEq)]
enum Bad {
    /// The file ends inside it.
    Short,
    /// Its bytes are wrong (tag, count, checksum or trailer).
    Damaged,
}

fn read<const N: usize>(data: &[u8], at: usize) -> Result<[u8; N], Bad> {
    let end = at.checked_add(N).ok_or(Bad::Damaged)?;
    let bytes = data.get(at..end).ok_or(Bad::Short)?;
    let mut out = [0u8; N];
    out.copy_from_slice(bytes);
    Ok(out)
}

/// Only zeros from `pos` on, where an entry should begin: the write stopped there (the rest is
/// the journal's preallocated space), so the batch is short rather than damaged.
fn ended_at(data: &[u8], pos: usize) -> Result<(), Bad> {
    if data.get(pos..).is_some_and(only_zeros) {
        return Err(Bad::Short);
    }
    Ok(())
}

/// The end offset of the whole, valid batch starting at `at`.
fn batch_at(data: &[u8], at: usize) -> Result<usize, Bad> {
    let [tag] = read::<1>(data, at)?;
    if tag != START {
        return Err(Bad::Damaged);
    }
    let count = u32::from_le_bytes(read::<4>(data, at + 1)?);
    let mut pos = at + 13;
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    for _ in 0..count {
        let [tag] = read::<1>(data, pos)?;
        ended_at(data, pos)?;
        let len = match tag {
            ITEM => {
                let key = u16::from_le_bytes(read::<2>(data, pos + 11)?) as usize;
                let stored = u32::from_le_bytes(read::<4>(data, pos + 17)?) as usize;
                21 + key + stored
            }
            CLEAR => 9,
            _ => return Err(Bad::Damaged),
        };
        let end = pos.checked_add(len).ok_or(Bad::Damaged)?;
        let entry = data.get(pos..end).ok_or(Bad::Short)?;
        hasher.update(entry);
        pos = end;
    }
    let [tag] = read::<1>(data, pos)?;
    ended_at(data, pos)?;
    if tag != END {
        return Err(Bad::Damaged);
    }
    let checksum = u64::from_le_bytes(read::<8>(data, pos + 1)?);
    let magic = read::<4>(data, pos + 9)?;
    if magic != MAGIC || checksum != hasher.finish() {
        return Err(Bad::Damaged);
    }
    Ok(pos + 13)
}

/// How a journal's bytes divide into whole batches and stretches that cannot be read.
#[derive(Debug, Default, PartialEq)]
struct Layout {
    good: Vec<(usize, usize)>,
    lost: Vec<(usize, usize)>,
    /// The only loss is a last batch cut short by the end of the file.
    cut_tail: bool,
}

fn only_zeros(bytes: &[u8]) -> bool {
    bytes.iter().all(|b| *b == 0)
}

fn layout(data: &[u8]) -> Layout {
    let mut out = Layout::default();
    let mut pos = 0;
    while pos < data.len() {
        let window = &data[pos..data.len().min(pos + ZERO_RUN)];
        if only_zeros(window) {
            break;
        }
        match batch_at(data, pos) {
            Ok(end) => {
                out.good.push((pos, end));
                pos = end;
            }
            Err(why) => {
                // Resynchronise: the next offset where a whole batch starts.
                let next = (pos + 1..data.len())
                    .filter(|&k| data[k] == START)
                    .find(|&k| batch_at(data, k).is_ok());
                let end = next.unwrap_or_else(|| data_end(data, pos));
                if next.is_none() && why == Bad::Short && out.lost.is_empty() {
                    out.cut_tail = true;
                }
                out.lost.push((pos, end));
                match next {
                    Some(k) => pos = k,
                    None => break,
                }
            }
        }
    }
    if out.lost.len() > 1 || out.lost.first().is_some_and(|l| l.1 < data_end(data, 0)) {
        out.cut_tail = false;
    }
    out
}

/// Where the data ends: the start of the trailing zeros.
fn data_end(data: &[u8], from: usize) -> usize {
    data.iter()
        .rposition(|b| *b != 0)
        .map_or(from, |i| (i + 1).max(from))
}

/// A journal's bytes up to where its data ends: a new journal is preallocated (64 MiB of hole)
/// and the data is written from its start, so reading stops at the first hole.
fn read_data(file: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut handle = std::fs::File::open(file)?;
    let len = handle.metadata()?.len();
    let end = nix::unistd::lseek(&handle, 0, nix::unistd::Whence::SeekHole)
        .ok()
        .and_then(|hole| u64::try_from(hole).ok())
        .map_or(len, |hole| hole.min(len));
    let mut data = Vec::new();
    std::io::Seek::rewind(&mut handle)?;
    handle.take(end).read_to_end(&mut data)?;
    Ok(data)
}

/// The journals of the store in `path` (`N.jnl`), in order.
fn journals(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(path)? {
        let path = entry?.path();
        let numbered = path
            .file_stem()
            .and_then(|s| s.to_str())
            .is_some_and(|s| s.parse::<u64>().is_ok());
        if numbered && path.extension().is_some_and(|e| e == "jnl") && path.is_file() {
            out.push(path);
        }
    }
    out.sort_by_key(|p| {
        p.file_stem()
            .and_then(|s| s.to_str())
            .and_then(|s| s.parse::<u64>().ok())
    });
    Ok(out)
}

/// Reads the journals of the store in `path`; when one is damaged, copies them to a folder beside
/// the store and rewrites them with every whole batch. Returns what was lost (None when nothing).
pub fn repair(path: &Path) -> std::io::Result<Option<Repair>> {
    if !path.is_dir() {
        return Ok(None);
    }
    let mut damaged = Vec::new();
    for file in journals(path)? {
        let data = read_data(&file)?;
        let found = layout(&data);
        if found.cut_tail {
            // The last write stopped half-way (a crash in the middle of it): it was never
            // acknowledged, and fjall drops it as it opens, as it always has.
            tracing::info!(journal = %file.display(), "the journal ends inside an unfinished write; it is dropped");
        } else if !found.lost.is_empty() {
            damaged.push((file, data, found));
        }
    }
    if damaged.is_empty() {
        return Ok(None);
    }
    let copy = copy_folder(path);
    std::fs::create_dir_all(&copy)?;
    let mut repair = Repair {
        copy: copy.clone(),
        ..Repair::default()
    };
    for (file, data, found) in &damaged {
        let name = file.file_name().unwrap_or_default();
        std::fs::copy(file, copy.join(name))?;
        repair.files.push(name.to_string_lossy().into_owned());
        repair.regions += found.lost.len();
        repair.kept += found.good.len();
        for &(start, end) in &found.lost {
            let bytes = &data[start..end];
            repair.bytes += bytes.len() as u64;
            scan_lost(bytes, &mut repair);
        }
        if repair.from.is_none() {
            // Nothing in the lost bytes tells the time: bound it by the batches around them.
            bound_by_neighbours(data, found, &mut repair);
        }
        rewrite(file, data, &found.good)?;
    }
    if let Ok(dir) = std::fs::File::open(path) {
        let _ = dir.sync_all();
    }
    tracing::warn!(store = %path.display(), copy = %copy.display(), regions = repair.regions, bytes = repair.bytes, kept = repair.kept, "the journal was damaged: kept every whole batch, set a copy aside");
    Ok(Some(repair))
}

/// One write held in a journal, as the rebuild of a store with a damaged table file needs it.
pub(super) struct Item {
    pub keyspace: u64,
    pub seqno: u64,
    /// fjall's value type: 0 a value, 1 and 2 a deletion.
    pub value_type: u8,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

/// Every write in the whole batches of the journals of the store in `path`, in order.
pub(super) fn items(path: &Path) -> std::io::Result<Vec<Item>> {
    let mut out = Vec::new();
    for file in journals(path)? {
        let data = read_data(&file)?;
        for (start, end) in layout(&data).good {
            items_of(&data[start..end], &mut out)
                .map_err(|_| std::io::Error::other(format!("{} cannot be read", file.display())))?;
        }
    }
    Ok(out)
}

/// The items of one whole batch (its checksum already checked).
fn items_of(batch: &[u8], out: &mut Vec<Item>) -> Result<(), Bad> {
    let count = u32::from_le_bytes(read::<4>(batch, 1)?);
    let seqno = u64::from_le_bytes(read::<8>(batch, 5)?);
    let mut pos = 13;
    for _ in 0..count {
        let [tag] = read::<1>(batch, pos)?;
        if tag == CLEAR {
            pos += 9;
            continue;
        }
        let [value_type, compression] = read::<2>(batch, pos + 1)?;
        let keyspace = u64::from_le_bytes(read::<8>(batch, pos + 3)?);
        let key_len = u16::from_le_bytes(read::<2>(batch, pos + 11)?) as usize;
        let value_len = u32::from_le_bytes(read::<4>(batch, pos + 13)?) as usize;
        let stored = u32::from_le_bytes(read::<4>(batch, pos + 17)?) as usize;
        let key_at = pos + 21;
        let key = batch.get(key_at..key_at + key_len).ok_or(Bad::Short)?;
        let value_at = key_at + key_len;
        let raw = batch.get(value_at..value_at + stored).ok_or(Bad::Short)?;
        let value = match compression {
            0 => raw.to_vec(),
            // fjall compresses journal values over 4 KiB with LZ4.
            1 => lz4_flex::decompress(raw, value_len).map_err(|_| Bad::Damaged)?,
            _ => return Err(Bad::Damaged),
        };
        out.push(Item {
            keyspace,
            seqno,
            value_type,
            key: key.to_vec(),
            value,
        });
        pos = value_at + stored;
    }
    Ok(())
}

/// `store.damaged-<unix seconds>` beside the store.
pub(super) fn copy_folder(store: &Path) -> PathBuf {
    let stamp = crate::util::now_ms() / 1000;
    let name = format!(
        "{}.damaged-{stamp}",
        store.file_name().unwrap_or_default().to_string_lossy()
    );
    store.with_file_name(name)
}

fn rewrite(file: &Path, data: &[u8], good: &[(usize, usize)]) -> std::io::Result<()> {
    let tmp = file.with_extension("jnl.repair");
    {
        let mut out = std::fs::File::create(&tmp)?;
        for &(start, end) in good {
            out.write_all(&data[start..end])?;
        }
        out.sync_all()?;
    }
    std::fs::rename(&tmp, file)
}

/// Collects the ids and times readable in lost bytes.
pub(super) fn scan_lost(bytes: &[u8], repair: &mut Repair) {
    for (id, time) in ids_in(bytes) {
        if !id.starts_with("ses_") {
            note_time(repair, time);
        }
        repair.ids.insert(id);
    }
    for time in json_times(bytes) {
        note_time(repair, time);
    }
}

fn note_time(repair: &mut Repair, time: u64) {
    repair.from = Some(repair.from.map_or(time, |t| t.min(time)));
    repair.to = Some(repair.to.map_or(time, |t| t.max(time)));
}

fn bound_by_neighbours(data: &[u8], found: &Layout, repair: &mut Repair) {
    let Some(&(lost_start, lost_end)) = found.lost.first() else {
        return;
    };
    let before = found
        .good
        .iter()
        .rev()
        .find(|g| g.1 <= lost_start)
        .and_then(|g| times(&data[g.0..g.1]).max());
    let after = found
        .good
        .iter()
        .find(|g| g.0 >= lost_end)
        .and_then(|g| times(&data[g.0..g.1]).min());
    repair.from = before;
    repair.to = after;
}

fn times(bytes: &[u8]) -> impl Iterator<Item = u64> {
    let ids: Vec<u64> = ids_in(bytes)
        .into_iter()
        .filter(|(id, _)| !id.starts_with("ses_"))
        .map(|(_, t)| t)
        .collect();
    ids.into_iter().chain(json_times(bytes))
}

/// `ses_`/`msg_`/`run_` ids (a ULID after the prefix) with the time their ULID carries.
fn ids_in(bytes: &[u8]) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for prefix in [&b"ses_"[..], b"msg_", b"run_"] {
        for at in memchr::memmem::find_iter(bytes, prefix) {
            let Some(ulid) = bytes.get(at + 4..at + 30) else {
                continue;
            };
            let Ok(text) = std::str::from_utf8(ulid) else {
                continue;
            };
            if let Ok(parsed) = ulid::Ulid::from_string(&text.to_uppercase()) {
                let id = format!("{}{}", String::from_utf8_lossy(prefix), text);
                out.push((id, parsed.timestamp_ms()));
            }
        }
    }
    out
}

/// Times in the JSON of events, sessions and runs: `"at"`, `"updatedAt"`, `"startedAt"`,
/// `"endedAt"` (a session's `createdAt` can be days older than the write, so it is left out).
fn json_times(bytes: &[u8]) -> Vec<u64> {
    let mut out = Vec::new();
    for field in [
        &b"\"at\":"[..],
        b"\"updatedAt\":",
        b"\"startedAt\":",
        b"\"endedAt\":",
    ] {
        for at in memchr::memmem::find_iter(bytes, field) {
            let digits: Vec<u8> = bytes[at + field.len()..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .copied()
                .collect();
            // Unix milliseconds have 13 digits from 2001 to 2286.
            if digits.len() == 13
                && let Some(n) = std::str::from_utf8(&digits)
                    .ok()
                    .and_then(|d| d.parse().ok())
            {
                out.push(n);
            }
        }
    }
    out
}

#[cfg(test)]
pub(super) mod tests_support {
    /// The whole batches of a journal's bytes.
    pub fn batches(data: &[u8]) -> Vec<(usize, usize)> {
        super::layout(data).good
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One batch as fjall writes it.
    fn batch(seqno: u64, items: &[(&[u8], &[u8])]) -> Vec<u8> {
        let mut out = vec![START];
        out.extend_from_slice(&(items.len() as u32).to_le_bytes());
        out.extend_from_slice(&seqno.to_le_bytes());
        let mut hasher = xxhash_rust::xxh3::Xxh3::new();
        for (key, value) in items {
            let mut entry = vec![ITEM, 0, 0];
            entry.extend_from_slice(&1u64.to_le_bytes());
            entry.extend_from_slice(&(key.len() as u16).to_le_bytes());
            entry.extend_from_slice(&(value.len() as u32).to_le_bytes());
            entry.extend_from_slice(&(value.len() as u32).to_le_bytes());
            entry.extend_from_slice(key);
            entry.extend_from_slice(value);
            hasher.update(&entry);
            out.extend_from_slice(&entry);
        }
        out.push(END);
        out.extend_from_slice(&hasher.finish().to_le_bytes());
        out.extend_from_slice(MAGIC);
        out
    }

    fn journal() -> (Vec<u8>, Vec<(usize, usize)>) {
        let mut data = Vec::new();
        let mut spans = Vec::new();
        for n in 0..4u64 {
            let start = data.len();
            data.extend(batch(
                n,
                &[(
                    b"\x03ses_01jd0000000000000000000000",
                    b"{\"updatedAt\":1764590000000}",
                )],
            ));
            spans.push((start, data.len()));
        }
        data.extend(vec![0u8; 10_000]);
        (data, spans)
    }

    #[test]
    fn a_clean_journal_has_no_losses() {
        let (data, spans) = journal();
        let found = layout(&data);
        assert_eq!(found.good, spans);
        assert!(found.lost.is_empty());
    }

    #[test]
    fn a_flip_in_an_earlier_batch_loses_only_that_batch() {
        let (mut data, spans) = journal();
        data[spans[1].0 + 40] ^= 0xff;
        let found = layout(&data);
        assert_eq!(found.good, vec![spans[0], spans[2], spans[3]]);
        assert_eq!(found.lost, vec![spans[1]]);
        assert!(!found.cut_tail);
    }

    #[test]
    fn a_flip_in_a_start_tag_resynchronises_on_the_next_batch() {
        let (mut data, spans) = journal();
        data[spans[2].0] = 0;
        let found = layout(&data);
        assert_eq!(found.good, vec![spans[0], spans[1], spans[3]]);
        assert_eq!(found.lost, vec![spans[2]]);
    }

    #[test]
    fn a_last_batch_stopped_before_the_preallocated_zeros_is_a_cut_tail() {
        let (data, spans) = journal();
        let mut cut = data[..spans[3].0 + 40].to_vec();
        cut.extend(vec![0u8; 4096]);
        let found = layout(&cut);
        assert_eq!(found.good, spans[..3].to_vec());
        assert!(found.cut_tail);
    }

    #[test]
    fn a_cut_last_batch_is_a_cut_tail() {
        let (data, spans) = journal();
        let cut = &data[..spans[3].0 + 20];
        let found = layout(cut);
        assert_eq!(found.good, spans[..3].to_vec());
        // The lost stretch runs to the last byte that is not zero.
        assert_eq!(found.lost.len(), 1);
        assert_eq!(found.lost[0].0, spans[3].0);
        assert!(found.cut_tail);
    }
}
