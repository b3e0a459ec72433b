//! Small per-partition files next to the segments: the log start offset, the leader-epoch
//! history and the clean-shutdown marker.
//!
//! Formats are Kafka's text checkpoint layout: a version line, a count line, one entry per line.
//! Every write goes through `io::write_file_atomic` (temporary file, fdatasync, rename, directory
//! sync), so a crash leaves the old or the new content, never a mix.
//! References: Kafka `LeaderEpochCheckpointFile`, `log-start-offset-checkpoint`,
//! `.kafka_cleanshutdown`.

use std::path::{Path, PathBuf};

pub const LOG_START_OFFSET_FILE: &str = "log-start-offset-checkpoint";
pub const LEADER_EPOCH_FILE: &str = "leader-epoch-checkpoint";
pub const CLEAN_SHUTDOWN_FILE: &str = ".clean-shutdown";
const CHECKPOINT_VERSION: &str = "0";
/// A checkpoint with more entries than this is treated as damaged.
pub const CHECKPOINT_ENTRIES_MAX: usize = 1 << 20;

pub fn path_in(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

/// What the clean-shutdown marker vouches for: the log end and, since format 2, every segment's
/// size and next offset as the clean close left them. An open trusts segments without scanning
/// only when the files agree with this (a segment cut short after the shutdown is noticed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CleanShutdown {
    pub log_end: i64,
    /// `None` for a format-1 marker (the log end alone, written by older versions).
    pub segments: Option<Vec<VouchedSegment>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VouchedSegment {
    pub base: i64,
    pub size_bytes: u64,
    pub next_offset: i64,
}

const CLEAN_SHUTDOWN_HEADER: &str = "clean-shutdown 2";

/// Encodes the marker as `clean-shutdown 2\nlog_end <n>\nsegment <base> <size> <next>\n...`.
pub fn encode_clean_shutdown(clean: &CleanShutdown) -> Vec<u8> {
    let mut text = format!("{CLEAN_SHUTDOWN_HEADER}\nlog_end {}\n", clean.log_end);
    for segment in clean.segments.iter().flatten() {
        text.push_str(&format!(
            "segment {} {} {}\n",
            segment.base, segment.size_bytes, segment.next_offset
        ));
    }
    text.into_bytes()
}

/// Parses a marker of either format; `None` for anything malformed (the open then recovers).
pub fn decode_clean_shutdown(bytes: &[u8]) -> Option<CleanShutdown> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut lines = text.lines();
    let first = lines.next()?.trim();
    if first != CLEAN_SHUTDOWN_HEADER {
        // Format 1: the log end alone.
        return Some(CleanShutdown { log_end: first.parse().ok()?, segments: None });
    }
    let log_end = lines.next()?.strip_prefix("log_end ")?.trim().parse().ok()?;
    let mut segments = Vec::new();
    for line in lines.filter(|line| !line.trim().is_empty()) {
        if segments.len() >= CHECKPOINT_ENTRIES_MAX {
            return None;
        }
        let mut fields = line.strip_prefix("segment ")?.split_whitespace();
        let segment = VouchedSegment {
            base: fields.next()?.parse().ok()?,
            size_bytes: fields.next()?.parse().ok()?,
            next_offset: fields.next()?.parse().ok()?,
        };
        if fields.next().is_some() {
            return None;
        }
        segments.push(segment);
    }
    Some(CleanShutdown { log_end, segments: Some(segments) })
}

/// One leader epoch and the first offset written under it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

/// Encodes entries as `version\ncount\n<a> <b>\n...`.
pub fn encode_pairs(pairs: &[(i64, i64)]) -> Vec<u8> {
    let mut text = format!("{CHECKPOINT_VERSION}\n{}\n", pairs.len());
    for (a, b) in pairs {
        text.push_str(&format!("{a} {b}\n"));
    }
    text.into_bytes()
}

/// Parses `encode_pairs` output; `None` for anything malformed.
pub fn decode_pairs(bytes: &[u8]) -> Option<Vec<(i64, i64)>> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut lines = text.lines();
    if lines.next()? != CHECKPOINT_VERSION {
        return None;
    }
    let count: usize = lines.next()?.parse().ok()?;
    if count > CHECKPOINT_ENTRIES_MAX {
        return None;
    }
    let mut pairs = Vec::with_capacity(count);
    for _ in 0..count {
        let mut fields = lines.next()?.split(' ');
        let a = fields.next()?.parse().ok()?;
        let b = fields.next()?.parse().ok()?;
        if fields.next().is_some() {
            return None;
        }
        pairs.push((a, b));
    }
    if lines.next().is_some() {
        return None;
    }
    Some(pairs)
}

pub fn encode_epochs(entries: &[EpochEntry]) -> Vec<u8> {
    let pairs: Vec<_> =
        entries.iter().map(|entry| (i64::from(entry.epoch), entry.start_offset)).collect();
    encode_pairs(&pairs)
}

/// Parses a leader-epoch checkpoint; entries must be increasing in epoch and start offset.
pub fn decode_epochs(bytes: &[u8]) -> Option<Vec<EpochEntry>> {
    let mut entries: Vec<EpochEntry> = Vec::new();
    for (epoch, start_offset) in decode_pairs(bytes)? {
        let epoch = i32::try_from(epoch).ok()?;
        if let Some(last) = entries.last() {
            if epoch <= last.epoch || start_offset < last.start_offset {
                return None;
            }
        }
        entries.push(EpochEntry { epoch, start_offset });
    }
    Some(entries)
}

/// The epoch in force at `offset` according to `entries`.
pub fn epoch_at(entries: &[EpochEntry], offset: i64) -> Option<i32> {
    entries.iter().rev().find(|entry| entry.start_offset <= offset).map(|entry| entry.epoch)
}

/// OffsetForLeaderEpoch's answer for `requested` (Kafka's `LeaderEpochFileCache.endOffsetFor`):
/// (the largest epoch at most `requested`, the start offset of the first epoch after it), or
/// (`requested`'s epoch, `log_end`) for the latest epoch, or (-1, -1) for an undefined or a
/// future epoch. `current` is the partition's leader epoch now: when the log holds no batch
/// of it yet it counts as starting at `log_end` (Kafka writes that entry when a replica
/// becomes leader; strata writes it with the epoch's first batch).
pub fn end_offset_for(
    entries: &[EpochEntry],
    requested: i32,
    current: Option<i32>,
    log_end: i64,
) -> (i32, i64) {
    const UNDEFINED: (i32, i64) = (-1, -1);
    if requested < 0 {
        return UNDEFINED;
    }
    let mut epochs: Vec<(i32, i64)> = entries.iter().map(|e| (e.epoch, e.start_offset)).collect();
    if let Some(current) = current {
        if epochs.last().is_none_or(|(latest, _)| *latest < current) {
            epochs.push((current, log_end));
        }
    }
    if epochs.last().is_some_and(|(latest, _)| *latest == requested) {
        return (requested, log_end);
    }
    let Some(&(_, next_start)) = epochs.iter().find(|(epoch, _)| *epoch > requested) else {
        return UNDEFINED;
    };
    match epochs.iter().rev().find(|(epoch, _)| *epoch <= requested) {
        Some(&(floor, _)) => (floor, next_start),
        None => (requested, next_start),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn end_offsets_for_epochs_follow_kafkas_leader_epoch_cache() {
        use super::*;
        let entries = [
            EpochEntry { epoch: 1, start_offset: 0 },
            EpochEntry { epoch: 3, start_offset: 10 },
            EpochEntry { epoch: 5, start_offset: 25 },
        ];
        let answer = |requested, current| end_offset_for(&entries, requested, current, 40);
        assert_eq!(answer(5, Some(5)), (5, 40), "the latest epoch ends at the log end");
        assert_eq!(answer(3, Some(5)), (3, 25));
        assert_eq!(answer(4, Some(5)), (3, 25), "a missing epoch: the one before it");
        assert_eq!(answer(1, None), (1, 10));
        assert_eq!(answer(0, None), (0, 0), "before the first epoch: its start");
        assert_eq!(answer(6, Some(5)), (-1, -1), "a future epoch is undefined");
        assert_eq!(answer(-1, Some(5)), (-1, -1));
        assert_eq!(answer(7, Some(7)), (7, 40), "the current epoch with no batch yet");
        assert_eq!(answer(5, Some(7)), (5, 40), "ends where the current one starts");
        assert_eq!(end_offset_for(&[], 0, Some(0), 0), (0, 0), "an empty log");
        assert_eq!(end_offset_for(&[], 0, None, 0), (-1, -1));
    }

    #[test]
    fn the_clean_shutdown_marker_round_trips_and_reads_the_old_format() {
        use super::*;
        let clean = CleanShutdown {
            log_end: 42,
            segments: Some(vec![
                VouchedSegment { base: 0, size_bytes: 4096, next_offset: 20 },
                VouchedSegment { base: 20, size_bytes: 123, next_offset: 42 },
            ]),
        };
        assert_eq!(decode_clean_shutdown(&encode_clean_shutdown(&clean)), Some(clean));
        assert_eq!(
            decode_clean_shutdown(b"17\n"),
            Some(CleanShutdown { log_end: 17, segments: None })
        );
        for bad in [&b""[..], b"x", b"clean-shutdown 2\nlog_end 1\nsegment 0 1\n"] {
            assert_eq!(decode_clean_shutdown(bad), None);
        }
    }

    use super::*;

    #[test]
    fn epoch_checkpoint_round_trips_and_rejects_disorder() {
        let entries = vec![
            EpochEntry { epoch: 0, start_offset: 0 },
            EpochEntry { epoch: 3, start_offset: 120 },
        ];
        let bytes = encode_epochs(&entries);
        assert_eq!(decode_epochs(&bytes), Some(entries.clone()));
        assert_eq!(epoch_at(&entries, 119), Some(0));
        assert_eq!(epoch_at(&entries, 120), Some(3));
        assert_eq!(decode_epochs(b"0\n2\n3 0\n1 5\n"), None);
        assert_eq!(decode_epochs(b"0\n2\n1 0\n"), None, "count larger than the entries");
        assert_eq!(decode_pairs(b"0\n1\n1 0\n9 9\n"), None, "trailing entry");
        assert_eq!(decode_pairs(b"garbage"), None);
    }
}
