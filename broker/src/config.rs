//! Broker settings for `strata serve` (flags today; the TOML file and environment come with #7).

use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub node_id: i32,
    pub data_dir: PathBuf,
    pub listen: SocketAddr,
    pub advertise_host: String,
    pub advertise_port: i32,
    pub admin_listen: SocketAddr,
    pub cores: usize,
    pub auto_create_topics: bool,
    pub num_partitions: i32,
    /// `socket.request.max.bytes`.
    pub request_bytes_max: usize,
    /// Per-shard batch cache budget.
    pub cache_bytes: usize,
    /// Kafka's `log.retention.check.interval.ms`.
    pub retention_check_interval_ms: i64,
    /// Kafka's `group.initial.rebalance.delay.ms`.
    pub initial_rebalance_delay_ms: u64,
    /// Kafka's `offsets.retention.minutes`, in milliseconds: committed offsets of groups
    /// without members expire this long after their last commit.
    pub offsets_retention_ms: u64,
    /// An `__consumer_offsets` partition larger than this is compacted (strata-specific).
    pub offsets_compact_bytes: u64,
}

/// `--advertise` default: the listen address, or `localhost:PORT` when listening on 0.0.0.0.
pub fn default_advertise(listen: SocketAddr) -> (String, i32) {
    let host = if listen.ip().is_unspecified() {
        "localhost".to_string()
    } else {
        listen.ip().to_string()
    };
    (host, i32::from(listen.port()))
}

/// Parses `HOST:PORT` for `--advertise`.
pub fn parse_advertise(value: &str) -> Result<(String, i32), String> {
    let (host, port) =
        value.rsplit_once(':').ok_or_else(|| format!("{value:?} is not HOST:PORT"))?;
    let port: u16 = port.parse().map_err(|_| format!("{value:?}: bad port"))?;
    if host.is_empty() {
        return Err(format!("{value:?}: empty host"));
    }
    Ok((host.trim_matches(|c| c == '[' || c == ']').to_string(), i32::from(port)))
}
