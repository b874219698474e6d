//! Damaged table files. fjall keeps what it has flushed from memory in table files
//! (`keyspaces/N/tables/ID`), each a run of checksummed blocks: data blocks first, then the index,
//! filter and meta blocks and a table of contents. A damaged index or meta block makes fjall refuse
//! the whole store at open; a damaged data block fails every read that reaches it.
//!
//! So before fjall opens the store, every table file is checked against the checksum its tree's
//! current version records for it. When one does not match (or is missing), the store is rebuilt:
//! every data block that still passes its own checksum is read (from every table file, the damaged
//! ones included), merged with the writes in the journals (the newest version of each key wins,
//! deletions included), and written into a fresh store that replaces the old one. The old store is
//! kept whole beside it, and what could not be read is described like a damaged journal: the
//! sessions named in and around the lost blocks and when they were written.
//!
//! Formats (lsm-tree 3): a version file is an sfa archive whose `tables` section lists, per level
//! and run, each table's id (u64), checksum type (u8, 0 = xxh3), checksum (xxh3-128 of the whole
//! file, u128) and global seqno (u64); `current` holds the current version's id (u64).
//! Integers are little-endian.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use lsm_tree::CompressionType;
use lsm_tree::coding::Decode;
use lsm_tree::table::block::decoder::ParsedItem;
use lsm_tree::table::block::{BlockType, Header};
use lsm_tree::table::{Block, DataBlock};

use super::handle::Filler;
use super::journal::{self, Repair};

/// What starts every block.
const BLOCK_MAGIC: &[u8] = b"LSM\x03";
/// The meta keyspace's tree: fjall's own records (keyspace names and options).
const META_TREE: u64 = 0;
/// Written into a rebuilt store once it is whole, removed once it is in place.
const REBUILT: &str = "totem-rebuilt";

/// A table file and what the current version says about it.
struct TableFile {
    path: PathBuf,
    /// None when the version cannot be read: the file is then not known to be whole.
    checksum: Option<u128>,
    global_seqno: u64,
}

/// One tree (keyspace) of the store.
struct Tree {
    id: u64,
    tables: Vec<TableFile>,
    /// Tables the version lists whose file is missing.
    missing: Vec<u64>,
}

fn invalid(what: impl Into<String>) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what.into())
}

/// The tables the current version of the tree in `folder` lists: id → (checksum, global seqno).
fn listed(folder: &Path) -> std::io::Result<BTreeMap<u64, (u128, u64)>> {
    let mut current = [0u8; 8];
    std::fs::File::open(folder.join("current"))?.read_exact(&mut current)?;
    let version = folder.join(format!("v{}", u64::from_le_bytes(current)));
    let reader = sfa::Reader::new(&version).map_err(|e| invalid(format!("{e:?}")))?;
    let section = reader
        .toc()
        .section(b"tables")
        .ok_or_else(|| invalid("the version has no table list"))?;
    let mut input = section.buf_reader(&version)?;
    let mut next = |n: usize| -> std::io::Result<Vec<u8>> {
        let mut buf = vec![0u8; n];
        input.read_exact(&mut buf)?;
        Ok(buf)
    };
    let num = |bytes: Vec<u8>| {
        bytes
            .iter()
            .rev()
            .fold(0u128, |n, b| (n << 8) | u128::from(*b))
    };
    let mut out = BTreeMap::new();
    let levels = num(next(1)?);
    for _ in 0..levels {
        let runs = num(next(1)?);
        for _ in 0..runs {
            let count = num(next(4)?);
            for _ in 0..count {
                let id = num(next(8)?) as u64;
                if next(1)?[0] != 0 {
                    return Err(invalid("a table checksum of an unknown type"));
                }
                let checksum = num(next(16)?);
                let global_seqno = num(next(8)?) as u64;
                out.insert(id, (checksum, global_seqno));
            }
        }
    }
    Ok(out)
}

/// The trees of the store in `path` and their table files.
fn trees(path: &Path) -> std::io::Result<Vec<Tree>> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(path.join("keyspaces")) else {
        return Ok(out);
    };
    for entry in entries {
        let entry = entry?;
        let Some(id) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u64>().ok())
        else {
            continue;
        };
        let folder = entry.path();
        let list = listed(&folder);
        let mut tree = Tree {
            id,
            tables: Vec::new(),
            missing: Vec::new(),
        };
        match &list {
            Ok(list) => {
                for (table, &(checksum, global_seqno)) in list {
                    let path = folder.join("tables").join(table.to_string());
                    if path.is_file() {
                        tree.tables.push(TableFile {
                            path,
                            checksum: Some(checksum),
                            global_seqno,
                        });
                    } else {
                        tree.missing.push(*table);
                    }
                }
            }
            Err(e) => {
                // No version to check against: every table file in the folder is read as it is.
                tracing::warn!(tree = %folder.display(), error = %e, "the store's table list cannot be read");
                if let Ok(files) = std::fs::read_dir(folder.join("tables")) {
                    for file in files.flatten() {
                        tree.tables.push(TableFile {
                            path: file.path(),
                            checksum: None,
                            global_seqno: 0,
                        });
                    }
                }
            }
        }
        out.push(tree);
    }
    out.sort_by_key(|t| t.id);
    Ok(out)
}

fn whole(table: &TableFile) -> bool {
    let Some(expected) = table.checksum else {
        return false;
    };
    std::fs::read(&table.path).is_ok_and(|data| xxhash_rust::xxh3::xxh3_128(&data) == expected)
}

/// A stretch of a table file that could not be read, and the keys read around it.
struct Lost {
    bytes: Vec<u8>,
    before: Option<Vec<u8>>,
    after: Option<Vec<u8>>,
}

/// What could be read from one table file.
#[derive(Default)]
struct Walk {
    /// (key, seqno, value type, value).
    items: Vec<(Vec<u8>, u64, u8, Vec<u8>)>,
    lost: Vec<Lost>,
}

/// The data block at `at` when it is whole: its items and its length on disk. `Err(true)` when a
/// whole block of another kind starts there (the data blocks end).
fn data_block_at(data: &[u8], at: usize) -> Result<(DataBlock, usize), bool> {
    let rest = data.get(at..).ok_or(false)?;
    let header = Header::decode_from(&mut &rest[..]).map_err(|_| false)?;
    if header.block_type != BlockType::Data {
        return Err(true);
    }
    // Tables written here store the first levels uncompressed and the deeper ones with LZ4; a
    // block whose stored and plain lengths differ is compressed.
    let compression = if header.data_length == header.uncompressed_length {
        CompressionType::None
    } else {
        CompressionType::Lz4
    };
    let block = Block::from_reader(&mut &rest[..], compression).map_err(|_| false)?;
    let len = Header::serialized_len() + header.data_length as usize;
    Ok((DataBlock::new(block), len))
}

/// Reads every data block of a table file that passes its checksum, skipping the ones that do not.
fn walk(data: &[u8], global_seqno: u64) -> Walk {
    let mut out = Walk::default();
    let mut pos = 0;
    let mut lost_from: Option<usize> = None;
    let mut last_key: Option<Vec<u8>> = None;
    while pos < data.len() {
        match data_block_at(data, pos) {
            Ok((block, len)) => {
                let bytes = block.as_slice().clone();
                let first = out.items.len();
                for item in block.iter() {
                    let value = item.materialize(&bytes);
                    out.items.push((
                        value.key.user_key.to_vec(),
                        value.key.seqno + global_seqno,
                        u8::from(value.key.value_type),
                        value.value.to_vec(),
                    ));
                }
                if let Some(from) = lost_from.take() {
                    out.lost.push(Lost {
                        bytes: data[from..pos].to_vec(),
                        before: last_key.clone(),
                        after: out.items.get(first).map(|i| i.0.clone()),
                    });
                }
                last_key = out.items.last().map(|i| i.0.clone()).or(last_key);
                pos += len;
            }
            Err(true) => break,
            Err(false) => {
                lost_from.get_or_insert(pos);
                // Resynchronise on the next block start.
                pos = memchr::memmem::find(&data[pos + 1..], BLOCK_MAGIC)
                    .map_or(data.len(), |k| pos + 1 + k);
            }
        }
    }
    if let Some(from) = lost_from {
        out.lost.push(Lost {
            bytes: data[from..pos.min(data.len())].to_vec(),
            before: last_key,
            after: None,
        });
    }
    if meta_number(data, b"item_count") == Some(out.items.len() as u64) {
        // Every item the table holds was read: what was damaged was its index or filter.
        out.lost.clear();
    }
    out
}

/// A number the table's meta block records (`item_count`, `seqno#min`), when the block is whole.
fn meta_number(data: &[u8], name: &[u8]) -> Option<u64> {
    // The meta block is the last block; the table of contents follows it.
    let starts: Vec<usize> = memchr::memmem::find_iter(data, BLOCK_MAGIC).collect();
    starts.iter().rev().find_map(|&at| {
        let rest = data.get(at..)?;
        let header = Header::decode_from(&mut &rest[..]).ok()?;
        if header.block_type != BlockType::Meta {
            return None;
        }
        let block = DataBlock::new(Block::from_reader(&mut &rest[..], CompressionType::None).ok()?);
        let bytes = block.as_slice().clone();
        block.iter().find_map(|item| {
            let entry = item.materialize(&bytes);
            (&*entry.key.user_key == name)
                .then(|| {
                    entry
                        .value
                        .get(..8)
                        .and_then(|v| v.try_into().ok())
                        .map(u64::from_le_bytes)
                })
                .flatten()
        })
    })
}

/// `store.rebuilding` beside the store.
fn building_folder(path: &Path) -> PathBuf {
    let name = format!(
        "{}.rebuilding",
        path.file_name().unwrap_or_default().to_string_lossy()
    );
    path.with_file_name(name)
}

/// Finishes a rebuild that stopped between moving the old store away and moving the new one in.
fn finish_interrupted(path: &Path) -> std::io::Result<()> {
    let building = building_folder(path);
    if !path.exists() && building.join(REBUILT).is_file() {
        std::fs::rename(&building, path)?;
        std::fs::remove_file(path.join(REBUILT))?;
    }
    Ok(())
}

/// Checks the table files of the store in `path`; when one is damaged or missing, rebuilds the
/// store from everything readable and sets the old one aside. Adds what was lost to `repair` (made
/// when there was none). Runs after the journal repair, before fjall opens the store.
pub fn repair(path: &Path, repair: &mut Option<Repair>) -> std::io::Result<()> {
    finish_interrupted(path)?;
    let trees = trees(path)?;
    let damaged: Vec<String> = trees
        .iter()
        .flat_map(|tree| {
            let bad = tree.tables.iter().filter(|t| !whole(t)).map(move |t| {
                format!(
                    "table {}/{}",
                    tree.id,
                    t.path.file_name().unwrap_or_default().to_string_lossy()
                )
            });
            let missing = tree
                .missing
                .iter()
                .map(move |t| format!("table {}/{t} (missing)", tree.id));
            bad.chain(missing).collect::<Vec<_>>()
        })
        .collect();
    if damaged.is_empty() {
        return Ok(());
    }
    let user: Vec<&Tree> = trees.iter().filter(|t| t.id != META_TREE).collect();
    let [tree] = user.as_slice() else {
        return Err(invalid(format!(
            "a table file of the store at {} is damaged ({}) and the store has {} keyspaces; restore a backup with `totem store restore`",
            path.display(),
            damaged.join(", "),
            user.len()
        )));
    };
    tracing::warn!(store = %path.display(), tables = ?damaged, "a table file is damaged: rebuilding the store from what can be read");

    // The newest write of every key: (seqno, value type, value).
    let mut latest: BTreeMap<Vec<u8>, (u64, u8, Vec<u8>)> = BTreeMap::new();
    let mut keep = |key: Vec<u8>, seqno: u64, value_type: u8, value: Vec<u8>| {
        if latest.get(&key).is_none_or(|(s, _, _)| *s < seqno) {
            latest.insert(key, (seqno, value_type, value));
        }
    };
    let made = repair.is_none();
    let out = repair.get_or_insert_with(|| Repair {
        copy: journal::copy_folder(path),
        ..Repair::default()
    });
    out.tables.extend(damaged.iter().cloned());
    let mut lost_ids = Vec::new();
    let journal = journal::items(path)?;
    // fjall keeps a journal until 64 MB more have been written and what it holds is in table
    // files: a table whose writes all came after the oldest journal began lost nothing with it.
    let journal_from = journal.iter().map(|i| i.seqno).min();
    for table in &tree.tables {
        let data = std::fs::read(&table.path)?;
        let mut found = walk(&data, table.global_seqno);
        let lowest = meta_number(&data, b"seqno#min")
            .map(|s| s + table.global_seqno)
            .or_else(|| found.items.iter().map(|i| i.1).min());
        if journal_from.is_some_and(|j| j == 0 || lowest.is_some_and(|l| j <= l)) {
            found.lost.clear();
        }
        for (key, seqno, value_type, value) in found.items {
            keep(key, seqno, value_type, value);
        }
        if !found.lost.is_empty() {
            out.files.push(format!(
                "table {}/{}",
                tree.id,
                table.path.file_name().unwrap_or_default().to_string_lossy()
            ));
        }
        for lost in found.lost {
            out.regions += 1;
            out.bytes += lost.bytes.len() as u64;
            journal::scan_lost(&lost.bytes, out);
            lost_ids.extend(lost.before.into_iter().chain(lost.after));
        }
    }
    for missing in &tree.missing {
        out.files
            .push(format!("table {}/{missing} (missing)", tree.id));
        out.regions += 1;
    }
    // The sessions on either side of a lost block: its keys lie between theirs.
    let times = (out.from, out.to);
    for key in lost_ids {
        journal::scan_lost(&key, out);
    }
    if times.0.is_some() {
        // Ids in neighbouring keys tell the sessions, not when the lost part was written.
        (out.from, out.to) = times;
    }
    for item in journal {
        if item.keyspace == tree.id {
            keep(item.key, item.seqno, item.value_type, item.value);
        }
    }

    let building = building_folder(path);
    if building.exists() {
        std::fs::remove_dir_all(&building)?;
    }
    write_fresh(
        &building,
        latest
            .into_iter()
            .filter(|(_, (_, t, _))| *t == 0)
            .map(|(k, (_, _, v))| (k, v)),
    )
    .map_err(|e| std::io::Error::other(format!("rebuilding the store: {e}")))?;
    std::fs::write(building.join(REBUILT), b"")?;

    std::fs::create_dir_all(&out.copy)?;
    std::fs::rename(path, out.copy.join("store"))?;
    std::fs::rename(&building, path)?;
    std::fs::remove_file(path.join(REBUILT))?;
    if let Some(home) = path.parent()
        && let Ok(dir) = std::fs::File::open(home)
    {
        let _ = dir.sync_all();
    }
    tracing::warn!(store = %path.display(), copy = %out.copy.display(), regions = out.regions, made, "the store was rebuilt from its readable blocks; the old one is kept");
    Ok(())
}

/// Writes `records` into a new store in `folder`.
fn write_fresh(
    folder: &Path,
    records: impl IntoIterator<Item = (Vec<u8>, Vec<u8>)>,
) -> fjall::Result<()> {
    let mut fill = Filler::new(folder)?;
    for (key, value) in records {
        fill.put(key, value)?;
    }
    fill.finish()
}

#[cfg(test)]
mod tests {
    use super::super::Store;
    use super::*;

    const KEYS: usize = 3000;

    fn key(i: usize) -> String {
        format!("k{i:05}")
    }

    /// A store whose keys are in one table file, plus a few newer writes only in the journal.
    fn store_with_a_table(dir: &Path) -> (PathBuf, PathBuf) {
        let path = dir.join("store");
        let store = Store::open(&path).unwrap();
        for i in 0..KEYS {
            let value = format!(
                "{{\"id\":\"ses_01jd{i:022}\",\"at\":1764590000000,\"pad\":\"{}\"}}",
                "x".repeat(100)
            );
            store.meta.insert(key(i), value).unwrap();
        }
        store
            .handle
            .keyspace()
            .unwrap()
            .rotate_memtable_and_wait()
            .unwrap();
        // Newer than the table: an update and a deletion.
        store.meta.insert(key(1), "newer").unwrap();
        let mut batch = store.batch().unwrap();
        store.meta.batch_remove(&mut batch, key(2));
        store.commit(batch).unwrap();
        store.persist().unwrap();
        drop(store);
        let tree = trees(&path)
            .unwrap()
            .into_iter()
            .find(|t| t.id != META_TREE)
            .unwrap();
        // fjall deletes a journal once it has rotated it (past 64 MB) and flushed what it holds.
        // Here: the journal keeps the two newer writes only, so the keys are in the table file
        // alone.
        for file in journal_files(&path) {
            let data = std::fs::read(&file).unwrap();
            let good = journal::tests_support::batches(&data);
            let mut kept = Vec::new();
            for (start, end) in &good[good.len() - 2..] {
                kept.extend_from_slice(&data[*start..*end]);
            }
            std::fs::write(&file, kept).unwrap();
        }
        let table = tree.tables.into_iter().next().expect("a table file").path;
        (path, table)
    }

    fn journal_files(path: &Path) -> Vec<PathBuf> {
        std::fs::read_dir(path)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "jnl"))
            .collect()
    }

    fn kept(store: &Store) -> usize {
        (0..KEYS)
            .filter(|i| store.meta.get(key(*i)).unwrap().is_some())
            .count()
    }

    fn copies(dir: &Path) -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().contains("store.damaged-"))
            .collect()
    }

    #[test]
    fn a_whole_store_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = store_with_a_table(dir.path());
        let store = Store::open(&path).unwrap();
        assert!(store.repair().is_none());
        assert_eq!(kept(&store), KEYS - 1);
        assert!(copies(dir.path()).is_empty());
    }

    #[test]
    fn a_flipped_data_block_loses_only_that_block() {
        let dir = tempfile::tempdir().unwrap();
        let (path, table) = store_with_a_table(dir.path());
        let mut data = std::fs::read(&table).unwrap();
        let at = memchr::memmem::find(&data, b"ses_01jd0000000000000000001500").unwrap();
        data[at + 20] ^= 0xff;
        std::fs::write(&table, &data).unwrap();

        let store = Store::open(&path).unwrap();
        let repair = store.repair().expect("repaired").clone();
        assert_eq!(repair.regions, 1);
        let left = kept(&store);
        assert!(
            left < KEYS - 1 && left > KEYS - 200,
            "one block lost: {left} kept"
        );
        assert!(store.meta.get(key(1500)).unwrap().is_none());
        assert_eq!(
            &*store.meta.get(key(1)).unwrap().unwrap(),
            b"newer",
            "the journal's writes win"
        );
        assert!(store.meta.get(key(2)).unwrap().is_none(), "deletions too");
        assert!(
            repair
                .ids
                .iter()
                .any(|id| id.starts_with("ses_01jd0000000000000000001")),
            "{:?}",
            repair.ids
        );
        assert_eq!(repair.from, Some(1_764_590_000_000));
        let copy = copies(dir.path());
        assert_eq!(copy.len(), 1);
        assert!(
            copy[0].join("store").join("keyspaces").is_dir(),
            "the old store is kept"
        );
        // Writes work, and the next open finds nothing to repair.
        store.meta.insert("after", "x").unwrap();
        store.persist().unwrap();
        drop(store);
        let again = Store::open(&path).unwrap();
        assert!(again.repair().is_none());
        assert_eq!(&*again.meta.get("after").unwrap().unwrap(), b"x");
    }

    #[test]
    fn a_damaged_index_loses_nothing_but_is_still_rebuilt() {
        let dir = tempfile::tempdir().unwrap();
        let (path, table) = store_with_a_table(dir.path());
        let mut data = std::fs::read(&table).unwrap();
        // The first block that is not a data block: the index.
        let index = memchr::memmem::find_iter(&data, BLOCK_MAGIC)
            .find(|&at| {
                Header::decode_from(&mut &data[at..])
                    .is_ok_and(|h| h.block_type == BlockType::Index)
            })
            .unwrap();
        data[index + 40] ^= 0xff;
        std::fs::write(&table, &data).unwrap();

        let store = Store::open(&path).unwrap();
        let repair = store.repair().expect("repaired").clone();
        assert_eq!(repair.regions, 0, "{repair:?}");
        assert_eq!(repair.tables.len(), 1);
        assert_eq!(kept(&store), KEYS - 1);
    }

    #[test]
    fn a_cut_table_keeps_the_blocks_before_the_cut() {
        let dir = tempfile::tempdir().unwrap();
        let (path, table) = store_with_a_table(dir.path());
        let data = std::fs::read(&table).unwrap();
        let at = memchr::memmem::find(&data, b"ses_01jd0000000000000000002000").unwrap();
        std::fs::write(&table, &data[..at]).unwrap();

        let store = Store::open(&path).unwrap();
        let repair = store.repair().expect("repaired").clone();
        assert_eq!(repair.regions, 1);
        let left = kept(&store);
        assert!(left > 1900 && left < 2100, "{left}");
        assert!(store.meta.get(key(10)).unwrap().is_some());
    }
}
