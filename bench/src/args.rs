//! The Kafka modes' command line (`produce`, `consume`, `e2e`): what to drive and how.

use clap::{Args, ValueEnum};
use wire::Compression;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    Produce,
    Consume,
    E2e,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Codec {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Codec {
    pub fn wire(self) -> Compression {
        match self {
            Codec::None => Compression::None,
            Codec::Gzip => Compression::Gzip,
            Codec::Snappy => Compression::Snappy,
            Codec::Lz4 => Compression::Lz4,
            Codec::Zstd => Compression::Zstd,
        }
    }
}

/// What record values hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Payload {
    Repeated,
    Text,
}

#[derive(Args, Debug, Clone)]
pub struct LoadArgs {
    /// Brokers to start from, `host:port[,host:port...]`: partitions are produced to and
    /// fetched from their leaders, found through Metadata.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    /// Connect over TLS (an SSL listener), trusting the CA certificates in this PEM file.
    #[arg(long)]
    pub tls_ca: Option<std::path::PathBuf>,
    #[arg(long, default_value = "strata-bench")]
    pub topic: String,
    /// Partitions to create the topic with (an existing topic keeps its own).
    #[arg(long, default_value_t = 1)]
    pub partitions: i32,
    /// Replicas to create the topic with (-1: the cluster's default.replication.factor).
    #[arg(long, default_value_t = -1)]
    pub replication_factor: i16,
    #[arg(long, default_value_t = 1)]
    pub producers: usize,
    #[arg(long, default_value_t = 1)]
    pub consumers: usize,
    #[arg(long, default_value_t = 100)]
    pub message_size: usize,
    /// Records are grouped into batches of up to this many bytes.
    #[arg(long, default_value_t = 16384)]
    pub batch_bytes: usize,
    /// Under --rate: the longest a due message waits for its batch to fill.
    #[arg(long, default_value_t = 0)]
    pub linger_ms: u64,
    /// 0, 1 or all.
    #[arg(long, default_value = "1")]
    pub acks: String,
    #[arg(long, value_enum, default_value_t = Codec::None)]
    pub compression: Codec,
    /// Record values: one repeated byte (compresses ~100x), or varied text (~2-4x, like real
    /// payloads; see `payload::text_value`).
    #[arg(long, value_enum, default_value_t = Payload::Repeated)]
    pub payload: Payload,
    /// Target messages per second across all producers (open loop); 0 = as fast as possible.
    #[arg(long, default_value_t = 0)]
    pub rate: u64,
    /// Stop after this many messages (produced, or consumed in consume mode).
    #[arg(long)]
    pub messages: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Seconds at the start whose results are not recorded.
    #[arg(long, default_value_t = 0.0)]
    pub warmup: f64,
    /// Idempotent producers (InitProducerId, producer id + sequence on every batch; needs
    /// --acks all, as Kafka clients require).
    #[arg(long)]
    pub idempotent: bool,
    /// Transactional producers (KIP-98): each commits a transaction every this many batches
    /// (AddPartitionsToTxn for its partitions, the batches, EndTxn). Implies --idempotent.
    #[arg(long)]
    pub transactional: Option<u64>,
    /// Produce requests each producer keeps in flight.
    #[arg(long, default_value_t = 5)]
    pub in_flight: usize,
    /// Batches (each for a different partition) one produce request carries at most; 0 = one
    /// for each partition the producer writes to, as Kafka clients drain every ready batch for
    /// a broker into one request. Requests stay under `--max-request-bytes`.
    #[arg(long, default_value_t = 0)]
    pub batches_per_request: usize,
    /// A request takes no further batch once it holds this many bytes of records (the Java
    /// client's `max.request.size`).
    #[arg(long, default_value_t = 1 << 20)]
    pub max_request_bytes: usize,
    /// Consume mode: start at the beginning or the end of each partition.
    #[arg(long, default_value = "beginning")]
    pub from: String,
    /// Pinned executors to run producers and consumers on (default: all cores).
    #[arg(long)]
    pub cores: Option<usize>,
    /// Write an HDR histogram interval log (one interval per second) here.
    #[arg(long)]
    pub hdr_log: Option<std::path::PathBuf>,
    #[arg(long)]
    pub json: bool,
    /// No per-second progress lines.
    #[arg(long)]
    pub quiet: bool,
}
