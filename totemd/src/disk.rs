//! The disk under Totem's home: free space, and the words for a full one. Shared by the store, the
//! blobs and `daemon.status`.

use std::path::Path;

use nix::errno::Errno;

/// Below this much free space a failed write is taken as the disk being full, and the store does
/// not try to write again until there is more.
pub const LOW_SPACE: u64 = 1024 * 1024;

/// Bytes a non-root process may still write on the filesystem holding `path` (None when it cannot
/// be asked).
pub fn free_bytes(path: &Path) -> Option<u64> {
    let stat = nix::sys::statvfs::statvfs(path).ok()?;
    Some((stat.blocks_available() as u64).saturating_mul(stat.fragment_size() as u64))
}

/// Whether `error` (or an error it wraps) says the disk or the user's quota is full.
pub fn is_no_space(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(error);
    while let Some(e) = current {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && let Some(code) = io.raw_os_error()
            && (code == Errno::ENOSPC as i32 || code == Errno::EDQUOT as i32)
        {
            return true;
        }
        current = e.source();
    }
    false
}

/// The sentence for a write that failed because the disk holding `folder` is full.
pub fn full_message(folder: &Path) -> String {
    let free =
        free_bytes(folder).map_or_else(|| "unknown".to_string(), totem_protocol::human_bytes);
    format!(
        "the disk holding {} is full ({free} free), so Totem cannot save anything. Free some space on it; Totem writes again by itself once there is room, and everything saved before is still there",
        folder.display()
    )
}

/// The words for an error from writing `path` (a blob, a snapshot, a file): the full-disk
/// sentence, naming the folder, when the disk is full; else the error itself.
pub fn explain(error: &(dyn std::error::Error + 'static), path: &Path) -> String {
    if is_no_space(error) {
        let folder = if path.is_dir() {
            path
        } else {
            path.parent().unwrap_or(path)
        };
        full_message(folder)
    } else {
        error.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_space_is_found_inside_wrapped_errors() {
        let io = std::io::Error::from_raw_os_error(nix::errno::Errno::ENOSPC as i32);
        let wrapped = anyhow::Error::from(io).context("writing");
        assert!(is_no_space(wrapped.as_ref()));
        let other = std::io::Error::from_raw_os_error(nix::errno::Errno::EIO as i32);
        assert!(!is_no_space(&other));
    }
}
