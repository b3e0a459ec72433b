//! `strata`: the broker binary and its CLI.
//!
//! `strata serve` runs the broker; `strata check` runs the startup checks every shard needs
//! (io_uring, locked memory, cores, direct I/O on the data directory from each pinned shard).

use broker::{cli, config, server};

#[global_allocator]
static ALLOCATOR: broker::alloc::LazyLargeAllocator = broker::alloc::LazyLargeAllocator;

use clap::{Parser, Subcommand};
use shard::runtime::{self, RuntimeConfig};
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "strata", version, about = "A Kafka-compatible, thread-per-core commit log")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the broker.
    Serve(ServeArgs),
    /// Manage topics on a running broker.
    Topic {
        #[command(subcommand)]
        command: TopicCommand,
        /// Broker to talk to.
        #[arg(long, short = 'b', global = true, default_value = "localhost:9092")]
        bootstrap: String,
    },
    /// Inspect consumer groups and move their committed offsets.
    Group {
        #[command(subcommand)]
        command: GroupCommand,
        #[arg(long, short = 'b', global = true, default_value = "localhost:9092")]
        bootstrap: String,
    },
    /// Produce records read from stdin, one per line.
    Produce {
        topic: String,
        #[arg(long, short = 'b', default_value = "localhost:9092")]
        bootstrap: String,
        /// Partition (default: by key hash, else round-robin).
        #[arg(long, short = 'p')]
        partition: Option<i32>,
        /// Split each line into KEY<sep>VALUE at the first occurrence of this separator.
        #[arg(long, short = 'k')]
        key_separator: Option<String>,
        /// 1 (leader has it) or -1/all (durable under the topic's flush policy).
        #[arg(long, default_value = "all")]
        acks: String,
    },
    /// Consume records and print one per line.
    Consume {
        topic: String,
        #[arg(long, short = 'b', default_value = "localhost:9092")]
        bootstrap: String,
        #[arg(long, short = 'p')]
        partition: Option<i32>,
        /// beginning, end, or an offset.
        #[arg(long, short = 'o', default_value = "beginning")]
        offset: String,
        /// Stop after this many records.
        #[arg(long, short = 'n')]
        count: Option<usize>,
        /// Stop at the end of the log instead of waiting for more.
        #[arg(long, short = 'e')]
        exit_at_end: bool,
        /// Print KEY<sep>VALUE.
        #[arg(long)]
        print_keys: bool,
        /// Print PARTITION:OFFSET<sep> before each record.
        #[arg(long)]
        print_offsets: bool,
        #[arg(long, default_value = "\t")]
        separator: String,
    },
    /// Check that this machine can run strata: io_uring, locked memory, cores, and direct I/O on
    /// the data directory from every shard.
    Check {
        /// Data directory to probe.
        #[arg(long, default_value = "./strata-data")]
        data_dir: PathBuf,
        /// Shards to start (default: all cores).
        #[arg(long)]
        cores: Option<usize>,
    },
}

fn main() {
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Check { data_dir, cores } => check(data_dir, cores),
        Command::Serve(args) => args.into_config().and_then(server::serve),
        Command::Topic { command, bootstrap } => match command {
            TopicCommand::Create { topic, partitions, config } => {
                cli::topic::create(&bootstrap, &topic, partitions, &config)
            }
            TopicCommand::List => cli::topic::list(&bootstrap),
            TopicCommand::Describe { topic } => cli::topic::describe(&bootstrap, &topic),
            TopicCommand::Delete { topic } => cli::topic::delete(&bootstrap, &topic),
            TopicCommand::AlterConfig { topic, set, delete } => {
                cli::topic::alter_config(&bootstrap, &topic, &set, &delete)
            }
        },
        Command::Group { command, bootstrap } => match command {
            GroupCommand::List => cli::group::list(&bootstrap),
            GroupCommand::Describe { group } => cli::group::describe(&bootstrap, &group),
            GroupCommand::Delete { group } => cli::group::delete(&bootstrap, &group),
            GroupCommand::ResetOffsets {
                group,
                topic,
                to_earliest,
                to_latest,
                to_offset,
                to_timestamp,
            } => {
                let to = match (to_earliest, to_latest, to_offset, to_timestamp) {
                    (true, _, _, _) => Ok(cli::group::ResetTo::Earliest),
                    (_, true, _, _) => Ok(cli::group::ResetTo::Latest),
                    (_, _, Some(offset), _) => Ok(cli::group::ResetTo::Offset(offset)),
                    (_, _, _, Some(timestamp)) => Ok(cli::group::ResetTo::Timestamp(timestamp)),
                    _ => {
                        Err("choose one of --to-earliest, --to-latest, --to-offset, --to-timestamp"
                            .to_string())
                    }
                };
                to.and_then(|to| cli::group::reset_offsets(&bootstrap, &group, &topic, to))
            }
        },
        Command::Produce { topic, bootstrap, partition, key_separator, acks } => {
            let acks = match acks.as_str() {
                "all" | "-1" => Ok(-1),
                "1" => Ok(1),
                other => Err(format!("--acks {other:?}: use 1 or all")),
            };
            acks.and_then(|acks| {
                cli::produce::run(
                    &bootstrap,
                    cli::produce::ProduceOptions { topic, partition, key_separator, acks },
                )
            })
        }
        Command::Consume {
            topic,
            bootstrap,
            partition,
            offset,
            count,
            exit_at_end,
            print_keys,
            print_offsets,
            separator,
        } => cli::consume::run(
            &bootstrap,
            cli::consume::ConsumeOptions {
                topic,
                partition,
                offset,
                count,
                exit_at_end,
                print_keys,
                print_offsets,
                key_separator: separator.replace("\\t", "\t"),
            },
        ),
    };
    if let Err(message) = outcome {
        eprintln!("strata: {message}");
        std::process::exit(1);
    }
}

#[derive(Subcommand)]
enum GroupCommand {
    /// List groups and their states.
    List,
    /// Members, assigned partitions, committed offsets, log end offsets and lag.
    Describe { group: String },
    /// Delete a group without members and its committed offsets.
    Delete { group: String },
    /// Move a group's committed offsets on one topic (only while the group has no members).
    ResetOffsets {
        group: String,
        #[arg(long)]
        topic: String,
        #[arg(long, group = "to")]
        to_earliest: bool,
        #[arg(long, group = "to")]
        to_latest: bool,
        #[arg(long, group = "to")]
        to_offset: Option<i64>,
        /// Milliseconds since the epoch: the first offset at or after this time.
        #[arg(long, group = "to")]
        to_timestamp: Option<i64>,
    },
}

#[derive(Subcommand)]
enum TopicCommand {
    /// Create a topic.
    Create {
        topic: String,
        #[arg(long, short = 'p', default_value_t = 1)]
        partitions: i32,
        /// Topic config, KEY=VALUE (repeatable).
        #[arg(long, short = 'c')]
        config: Vec<String>,
    },
    /// List topics.
    List,
    /// Show partitions, offsets and configs of a topic.
    Describe { topic: String },
    /// Delete a topic.
    Delete { topic: String },
    /// Set (KEY=VALUE) or delete (KEY) topic config overrides.
    AlterConfig {
        topic: String,
        #[arg(long)]
        set: Vec<String>,
        #[arg(long)]
        delete: Vec<String>,
    },
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Where partitions and metadata live.
    #[arg(long, default_value = "./strata-data")]
    data_dir: PathBuf,
    /// Kafka listener.
    #[arg(long, default_value = "0.0.0.0:9092")]
    listen: SocketAddr,
    /// Address returned in Metadata (default: the listen address, or localhost:PORT when
    /// listening on 0.0.0.0).
    #[arg(long)]
    advertise: Option<String>,
    /// HTTP listener for /metrics and /health.
    #[arg(long, default_value = "127.0.0.1:9644")]
    admin_listen: SocketAddr,
    /// Shards (one per core, pinned); default all cores.
    #[arg(long)]
    cores: Option<usize>,
    #[arg(long, default_value_t = 0)]
    node_id: i32,
    /// Kafka's auto.create.topics.enable.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    auto_create_topics: bool,
    /// Kafka's num.partitions: partitions of auto-created topics.
    #[arg(long, default_value_t = 1)]
    num_partitions: i32,
    /// Kafka's socket.request.max.bytes.
    #[arg(long, default_value_t = wire::protocol::REQUEST_BYTES_MAX_DEFAULT)]
    request_bytes_max: usize,
    /// Per-shard cache of recent batches, in bytes.
    #[arg(long, default_value_t = shard::cache::BATCH_CACHE_BYTES_DEFAULT)]
    cache_bytes: usize,
    /// Kafka's log.retention.check.interval.ms.
    #[arg(long, default_value_t = 300_000)]
    retention_check_interval_ms: i64,
    /// Kafka's group.initial.rebalance.delay.ms.
    #[arg(long, default_value_t = broker::group::membership::INITIAL_REBALANCE_DELAY_MS_DEFAULT)]
    group_initial_rebalance_delay_ms: u64,
    /// Kafka's offsets.retention.minutes, in milliseconds (default 7 days).
    #[arg(long, default_value_t = 7 * 24 * 3600 * 1000)]
    offsets_retention_ms: u64,
    /// Compact an __consumer_offsets partition once it holds more than this many bytes.
    #[arg(long, default_value_t = 64 << 20)]
    offsets_compact_bytes: u64,
}

impl ServeArgs {
    fn into_config(self) -> Result<config::BrokerConfig, String> {
        let (advertise_host, advertise_port) = match &self.advertise {
            Some(value) => config::parse_advertise(value)?,
            None => config::default_advertise(self.listen),
        };
        if self.num_partitions < 1 {
            return Err("--num-partitions must be at least 1".into());
        }
        Ok(config::BrokerConfig {
            node_id: self.node_id,
            data_dir: self.data_dir,
            listen: self.listen,
            advertise_host,
            advertise_port,
            admin_listen: self.admin_listen,
            cores: self.cores.unwrap_or_else(runtime::available_cores),
            auto_create_topics: self.auto_create_topics,
            num_partitions: self.num_partitions,
            request_bytes_max: self.request_bytes_max,
            cache_bytes: self.cache_bytes,
            retention_check_interval_ms: self.retention_check_interval_ms.max(1),
            initial_rebalance_delay_ms: self.group_initial_rebalance_delay_ms,
            offsets_retention_ms: self.offsets_retention_ms.max(1),
            offsets_compact_bytes: self.offsets_compact_bytes.max(4096),
        })
    }
}

fn check(data_dir: PathBuf, cores: Option<usize>) -> Result<(), String> {
    let mut config = RuntimeConfig::all_cores();
    if let Some(cores) = cores {
        config.cores = cores;
    }
    let preflight =
        runtime::preflight(config.cores, config.io_memory_bytes).map_err(|e| e.to_string())?;
    for warning in &preflight.warnings {
        tracing::warn!("{warning}");
    }
    tracing::info!(
        cores = config.cores,
        available_cores = preflight.available_cores,
        memlock_limit_bytes = preflight.memlock_limit_bytes,
        cap_ipc_lock = preflight.has_cap_ipc_lock,
        "preflight passed"
    );
    let results = runtime::run_shards(&config, move |context| {
        let data_dir = data_dir.clone();
        async move {
            runtime::open_storage(&data_dir)
                .await
                .map(|_| context.shard_id.0)
                .map_err(|error| format!("shard {}: {error}", context.shard_id.0))
        }
    })
    .map_err(|e| e.to_string())?;
    for result in results {
        let shard = result?;
        tracing::info!(shard, "direct I/O works");
    }
    println!("ok");
    Ok(())
}
