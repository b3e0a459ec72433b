//! Sparse offset index (`.index`) and time index (`.timeindex`) of one segment.
//!
//! Formats (big-endian, Kafka's): `.index` entries are (relative offset u32, position u32), 8
//! bytes; `.timeindex` entries are (timestamp i64, relative offset u32), 12 bytes. Both are kept
//! in memory for every open segment and written to disk when a segment is sealed and at clean
//! shutdown; after a crash the active segment's indexes are rebuilt from the log.
//!
//! Invariants: offset-index entries are strictly increasing in both offset and position;
//! time-index entries are strictly increasing in timestamp and non-decreasing in offset.
//! `decode` checks these and the bounds, so a damaged file is rebuilt rather than trusted.

pub const OFFSET_INDEX_ENTRY_BYTES: usize = 8;
pub const TIME_INDEX_ENTRY_BYTES: usize = 12;

/// Relative offset → file position, one entry every `index.interval.bytes` of log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OffsetIndex {
    entries: Vec<(u32, u32)>,
}

impl OffsetIndex {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn last(&self) -> Option<(u32, u32)> {
        self.entries.last().copied()
    }

    pub fn push(&mut self, relative_offset: u32, position: u32) {
        if let Some(&(last_offset, last_position)) = self.entries.last() {
            assert!(relative_offset > last_offset && position > last_position, "index order");
        }
        self.entries.push((relative_offset, position));
    }

    /// The entry with the largest offset `<= relative_offset`, or the segment start.
    pub fn lookup(&self, relative_offset: u32) -> (u32, u32) {
        let after = self.entries.partition_point(|&(offset, _)| offset <= relative_offset);
        match after.checked_sub(1).and_then(|i| self.entries.get(i)) {
            Some(&entry) => entry,
            None => (0, 0),
        }
    }

    /// Drops entries pointing at or past `position`.
    pub fn truncate_to_position(&mut self, position: u32) {
        self.entries.retain(|&(_, entry_position)| entry_position < position);
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.entries.len() * OFFSET_INDEX_ENTRY_BYTES);
        for &(offset, position) in &self.entries {
            out.extend_from_slice(&offset.to_be_bytes());
            out.extend_from_slice(&position.to_be_bytes());
        }
        out
    }

    /// Parses an index file, or `None` when it is damaged or does not fit a segment of
    /// `segment_size` bytes holding `offset_span` offsets.
    pub fn decode(bytes: &[u8], segment_size: u64, offset_span: u64) -> Option<Self> {
        if !bytes.len().is_multiple_of(OFFSET_INDEX_ENTRY_BYTES) {
            return None;
        }
        let mut index = Self::default();
        for entry in bytes.chunks_exact(OFFSET_INDEX_ENTRY_BYTES) {
            let offset = u32::from_be_bytes(entry.get(..4)?.try_into().ok()?);
            let position = u32::from_be_bytes(entry.get(4..8)?.try_into().ok()?);
            if let Some(&(last_offset, last_position)) = index.entries.last() {
                if offset <= last_offset || position <= last_position {
                    return None;
                }
            }
            if u64::from(position) >= segment_size || u64::from(offset) >= offset_span {
                return None;
            }
            index.entries.push((offset, position));
        }
        Some(index)
    }
}

/// Max timestamp so far → relative offset of the record carrying it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TimeIndex {
    entries: Vec<(i64, u32)>,
}

impl TimeIndex {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn last(&self) -> Option<(i64, u32)> {
        self.entries.last().copied()
    }

    /// Adds an entry if `timestamp` is above the last one (the index only records increases).
    pub fn maybe_push(&mut self, timestamp: i64, relative_offset: u32) {
        match self.entries.last() {
            Some(&(last_timestamp, last_offset)) => {
                if timestamp > last_timestamp && relative_offset >= last_offset {
                    self.entries.push((timestamp, relative_offset));
                }
            }
            None => self.entries.push((timestamp, relative_offset)),
        }
    }

    /// The offset to start scanning from for the first record with timestamp `>= target`: the
    /// offset of the last entry whose timestamp is below `target`, or the segment start.
    pub fn scan_start(&self, target_timestamp: i64) -> u32 {
        let below = self.entries.partition_point(|&(timestamp, _)| timestamp < target_timestamp);
        match below.checked_sub(1).and_then(|i| self.entries.get(i)) {
            Some(&(_, offset)) => offset,
            None => 0,
        }
    }

    /// Drops entries for offsets at or past `relative_offset`.
    pub fn truncate_to_offset(&mut self, relative_offset: u32) {
        self.entries.retain(|&(_, offset)| offset < relative_offset);
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.entries.len() * TIME_INDEX_ENTRY_BYTES);
        for &(timestamp, offset) in &self.entries {
            out.extend_from_slice(&timestamp.to_be_bytes());
            out.extend_from_slice(&offset.to_be_bytes());
        }
        out
    }

    /// Parses a time index file, or `None` when damaged or out of the segment's offset span.
    pub fn decode(bytes: &[u8], offset_span: u64) -> Option<Self> {
        if !bytes.len().is_multiple_of(TIME_INDEX_ENTRY_BYTES) {
            return None;
        }
        let mut index = Self::default();
        for entry in bytes.chunks_exact(TIME_INDEX_ENTRY_BYTES) {
            let timestamp = i64::from_be_bytes(entry.get(..8)?.try_into().ok()?);
            let offset = u32::from_be_bytes(entry.get(8..12)?.try_into().ok()?);
            if let Some(&(last_timestamp, last_offset)) = index.entries.last() {
                if timestamp <= last_timestamp || offset < last_offset {
                    return None;
                }
            }
            if u64::from(offset) >= offset_span {
                return None;
            }
            index.entries.push((timestamp, offset));
        }
        Some(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_index_lookup_finds_the_floor_entry() {
        let mut index = OffsetIndex::default();
        index.push(10, 4100);
        index.push(25, 8300);
        assert_eq!(index.lookup(0), (0, 0));
        assert_eq!(index.lookup(9), (0, 0));
        assert_eq!(index.lookup(10), (10, 4100));
        assert_eq!(index.lookup(24), (10, 4100));
        assert_eq!(index.lookup(1000), (25, 8300));
    }

    #[test]
    fn offset_index_round_trips_and_rejects_damage() {
        let mut index = OffsetIndex::default();
        index.push(10, 4100);
        index.push(25, 8300);
        let bytes = index.encode();
        assert_eq!(OffsetIndex::decode(&bytes, 9000, 100), Some(index.clone()));
        assert_eq!(OffsetIndex::decode(&bytes[..12], 9000, 100), None, "partial entry");
        assert_eq!(OffsetIndex::decode(&bytes, 8000, 100), None, "position past the log");
        assert_eq!(OffsetIndex::decode(&bytes, 9000, 20), None, "offset past the segment");
        let mut swapped = bytes[8..].to_vec();
        swapped.extend_from_slice(&bytes[..8]);
        assert_eq!(OffsetIndex::decode(&swapped, 9000, 100), None, "out of order");
        index.truncate_to_position(8300);
        assert_eq!(index.last(), Some((10, 4100)));
    }

    #[test]
    fn time_index_scan_start_is_the_last_entry_below_the_target() {
        let mut index = TimeIndex::default();
        index.maybe_push(100, 0);
        index.maybe_push(90, 3);
        index.maybe_push(200, 5);
        index.maybe_push(300, 9);
        assert_eq!(index.len(), 3, "a lower timestamp adds no entry");
        assert_eq!(index.scan_start(50), 0);
        assert_eq!(index.scan_start(100), 0);
        assert_eq!(index.scan_start(150), 0);
        assert_eq!(index.scan_start(201), 5);
        assert_eq!(index.scan_start(1000), 9);
        let bytes = index.encode();
        assert_eq!(TimeIndex::decode(&bytes, 10), Some(index.clone()));
        assert_eq!(TimeIndex::decode(&bytes, 9), None);
        index.truncate_to_offset(5);
        assert_eq!(index.last(), Some((100, 0)));
    }
}
