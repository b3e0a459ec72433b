//! Per-partition log settings, named and defaulted as Kafka's topic configs are.
//!
//! References: Kafka topic configs `segment.bytes`, `segment.ms`, `retention.ms`,
//! `retention.bytes`, `index.interval.bytes`, `max.message.bytes`, `flush.ms`/`flush.messages`.

/// When appended data is made durable with fdatasync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushPolicy {
    /// fdatasync before an append is acknowledged; concurrent appends share one sync.
    Always,
    /// fdatasync at most this many milliseconds after an append (a crash may lose that window).
    IntervalMs(u64),
    /// Never sync explicitly except at segment roll and clean shutdown.
    Never,
}

/// Settings for one partition log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    pub segment_bytes: u64,
    pub segment_ms: u64,
    /// `None` keeps data forever (Kafka's -1).
    pub retention_ms: Option<u64>,
    /// `None` is unlimited (Kafka's default -1).
    pub retention_bytes: Option<u64>,
    pub index_interval_bytes: u64,
    pub max_message_bytes: usize,
    pub flush: FlushPolicy,
    /// Size of each direct-I/O chunk write (strata tuning, not a Kafka config).
    pub write_chunk_bytes: usize,
    /// `cleanup.policy` contains `delete`: retention deletes old segments.
    pub cleanup_delete: bool,
    /// `cleanup.policy` contains `compact`: `PartitionLog::compact` keeps the last record per key.
    pub cleanup_compact: bool,
    /// Kafka's `delete.retention.ms`: how long a tombstone stays after compaction reaches it.
    pub delete_retention_ms: u64,
    /// Kafka's `message.timestamp.before.max.ms`: how far behind the broker's clock a record's
    /// timestamp may be (checked when a client's batch is validated).
    pub timestamp_before_max_ms: i64,
    /// Kafka's `message.timestamp.after.max.ms`: how far ahead of it.
    pub timestamp_after_max_ms: i64,
    /// Kafka's `message.timestamp.type=LogAppendTime`: the broker stamps each batch with its
    /// clock at append (the batch's max timestamp and timestamp-type bit), and record
    /// timestamps are not checked.
    pub log_append_time: bool,
    /// Kafka's `preallocate`: a new segment reserves its whole `segment_bytes` on disk at once.
    /// Off (the default), the active segment reserves ahead in steps that follow the
    /// partition's write rate (`partition_log::preallocation`).
    pub preallocate: bool,
    /// Kafka's `compression.type` when it names a codec: batches in another codec are
    /// re-compressed into it on append (`None`: `producer`, each batch kept as sent), at
    /// `compression_level` (the codec's `compression.*.level`; `None` its default).
    pub compression: Option<wire::Compression>,
    pub compression_level: Option<i32>,
}

/// Kafka's defaults: 1 GiB segments, 7 days, unlimited bytes, 4 KiB index interval, and
/// `max.message.bytes` 1048588.
pub const SEGMENT_BYTES_DEFAULT: u64 = 1 << 30;
pub const SEGMENT_MS_DEFAULT: u64 = 7 * 24 * 3600 * 1000;
pub const RETENTION_MS_DEFAULT: u64 = 7 * 24 * 3600 * 1000;
pub const INDEX_INTERVAL_BYTES_DEFAULT: u64 = 4096;
pub const MAX_MESSAGE_BYTES_DEFAULT: usize = 1_048_588;
/// Kafka's `delete.retention.ms` default (1 day).
pub const DELETE_RETENTION_MS_DEFAULT: u64 = 24 * 3600 * 1000;
/// The largest batch the storage engine will accept whatever the topic says (segment positions
/// are 32-bit in the index format, and a batch must fit in one segment).
pub const BATCH_BYTES_MAX: usize = 64 << 20;
/// Default size of each direct-I/O chunk write.
pub const WRITE_CHUNK_BYTES_DEFAULT: usize = 1 << 20;
const _: () = assert!(WRITE_CHUNK_BYTES_DEFAULT.is_multiple_of(crate::io::DMA_ALIGNMENT));
/// Index positions are u32, so a segment cannot outgrow 4 GiB.
pub const SEGMENT_BYTES_MAX: u64 = u32::MAX as u64;

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            segment_bytes: SEGMENT_BYTES_DEFAULT,
            segment_ms: SEGMENT_MS_DEFAULT,
            retention_ms: Some(RETENTION_MS_DEFAULT),
            retention_bytes: None,
            index_interval_bytes: INDEX_INTERVAL_BYTES_DEFAULT,
            max_message_bytes: MAX_MESSAGE_BYTES_DEFAULT,
            flush: FlushPolicy::Always,
            write_chunk_bytes: WRITE_CHUNK_BYTES_DEFAULT,
            cleanup_delete: true,
            cleanup_compact: false,
            delete_retention_ms: DELETE_RETENTION_MS_DEFAULT,
            timestamp_before_max_ms: i64::MAX,
            timestamp_after_max_ms: i64::MAX,
            log_append_time: false,
            preallocate: false,
            compression: None,
            compression_level: None,
        }
    }
}

impl LogConfig {
    /// Checks ranges; returns a message naming the bad key.
    pub fn validate(&self) -> Result<(), String> {
        if self.segment_bytes < 14 || self.segment_bytes > SEGMENT_BYTES_MAX {
            return Err(format!("segment.bytes must be in 14..={SEGMENT_BYTES_MAX}"));
        }
        if self.segment_ms == 0 {
            return Err("segment.ms must be at least 1".into());
        }
        if self.index_interval_bytes == 0 {
            return Err("index.interval.bytes must be at least 1".into());
        }
        if self.max_message_bytes == 0 || self.max_message_bytes > BATCH_BYTES_MAX {
            return Err(format!("max.message.bytes must be in 1..={BATCH_BYTES_MAX}"));
        }
        if self.write_chunk_bytes == 0
            || !self.write_chunk_bytes.is_multiple_of(crate::io::DMA_ALIGNMENT)
            || self.write_chunk_bytes > 64 << 20
        {
            return Err("write chunk bytes must be a multiple of 4096 up to 64 MiB".into());
        }
        Ok(())
    }
}
