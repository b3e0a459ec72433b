//! `strata`: the broker binary and its CLI.
//!
//! `strata serve` runs the broker; `strata doctor` checks the host (io_uring, locked memory,
//! data directory, limits, CPUs, huge pages, clock, direct I/O from each pinned shard).

use broker::{cli, config, server};

#[global_allocator]
static ALLOCATOR: broker::alloc::LazyLargeAllocator = broker::alloc::LazyLargeAllocator;

use clap::{Parser, Subcommand};
use shard::runtime;
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "strata", version, about = "A Kafka-compatible, thread-per-core commit log")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// A client setting, by librdkafka's name, for every command that talks to a cluster
    /// (repeatable): security.protocol=sasl_ssl, sasl.mechanism=SCRAM-SHA-512,
    /// sasl.username=..., sasl.password=..., ssl.ca.location=FILE, ...
    #[arg(short = 'X', global = true, value_name = "KEY=VALUE")]
    client_settings: Vec<String>,
    /// A file of client settings (key=value lines, librdkafka's names), read before -X;
    /// default: the STRATA_CLIENT_CONFIG environment variable.
    #[arg(long, global = true, value_name = "FILE")]
    client_config: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the broker.
    Serve(Box<ServeArgs>),
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
    /// Transactions: list transactional ids, describe one, abort its open transaction.
    Txn {
        #[command(subcommand)]
        command: TxnCommand,
        #[arg(long, short = 'b', global = true, default_value = "localhost:9092")]
        bootstrap: String,
    },
    /// Client quotas (produce and fetch byte rates per user and client id): set, delete, list.
    Quota {
        #[command(subcommand)]
        command: QuotaCommand,
        #[arg(long, short = 'b', global = true, default_value = "localhost:9092")]
        bootstrap: String,
    },
    /// ACLs (enforced when authorizer.class.name is set): create, list, delete.
    Acl {
        #[command(subcommand)]
        command: AclCommand,
        #[arg(long, short = 'b', global = true, default_value = "localhost:9092")]
        bootstrap: String,
    },
    /// SCRAM users (SCRAM-SHA-256 and -512 logins on SASL listeners): create, list, delete.
    User {
        #[command(subcommand)]
        command: UserCommand,
        #[arg(long, short = 'b', global = true, default_value = "localhost:9092")]
        bootstrap: String,
    },
    /// Certificates for trying the SSL listener: a CA, a broker certificate it signs, and a
    /// client certificate for mTLS.
    Cert {
        #[command(subcommand)]
        command: CertCommand,
    },
    /// A cluster: its status, or a local one on loopback ports for trying it.
    Cluster {
        #[command(subcommand)]
        command: ClusterCommand,
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
        /// Print each record once acknowledged, in this format: %t topic, %p partition,
        /// %o offset, %k key, %v value, %T timestamp, \n, \t (e.g. '%p %o\n').
        #[arg(long, short = 'f')]
        format: Option<String>,
    },
    /// Consume records and print one per line.
    Consume {
        topic: String,
        #[arg(long, short = 'b', default_value = "localhost:9092")]
        bootstrap: String,
        #[arg(long, short = 'p')]
        partition: Option<i32>,
        /// Where to start, per partition: start, end, an offset, +N (after the start), -N
        /// (before the end), @MS (a timestamp); FROM:TO for a range (TO exclusive, any of the
        /// same forms; `end` is the end when the command started).
        #[arg(long, short = 'o', default_value = "start", allow_hyphen_values = true)]
        offset: String,
        /// Stop after this many records.
        #[arg(long, short = 'n', alias = "num")]
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
        /// Print each record in this format: %t topic, %p partition, %o offset, %k key,
        /// %v value, %T timestamp (ms), %h headers, \n, \t (default '%v\n').
        #[arg(long, short = 'f')]
        format: Option<String>,
        /// Start at this group's committed offsets (else at -o) and commit what is printed,
        /// from outside the group (refused while it has members).
        #[arg(long, short = 'g')]
        group: Option<String>,
    },
    /// Check that this host can run the broker as configured (same flags, file and environment
    /// as `serve`): io_uring, locked memory, data directory, limits, CPUs, huge pages, clock.
    #[command(alias = "check")]
    Doctor(Box<ServeArgs>),
    /// Rebuild a lost strata-metadata.json from the partition directories (broker stopped;
    /// same flags as `serve`). Topic config overrides and the cluster id are not recovered.
    RecoverMetadata(Box<ServeArgs>),
}

/// Logs to stderr at `level`, unless RUST_LOG gives a filter. openraft logs every vote and
/// election at info, so below debug it logs only its warnings.
fn init_logging(level: &str) {
    use std::io::IsTerminal;
    let filter = match level {
        "error" | "warn" | "info" => format!("{level},openraft=warn"),
        _ => level.to_string(),
    };
    let level = filter.as_str();
    tracing_subscriber::fmt()
        .with_writer(broker::log_output::LossyStderr)
        .log_internal_errors(false)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level)),
        )
        .init();
}

fn serve(args: Box<ServeArgs>) -> Result<(), String> {
    let settings = args.settings()?;
    let config = config::BrokerConfig::from_settings(&settings)?;
    init_logging(&config.log_level);
    log_startup(&settings, &config);
    server::serve(config)
}

fn main() {
    broker::alloc::tune_system_allocator();
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Serve(_)) {
        prepare_client_command(&cli);
    }
    if let Err(message) = run(cli.command) {
        eprintln!("strata: {message}");
        std::process::exit(1);
    }
}

/// Prepares a CLI command (any but `serve`): quiet on a closed pipe, logging, client settings.
fn prepare_client_command(cli: &Cli) {
    // A CLI command piped into `head` ends quietly when the pipe closes, as Unix tools do,
    // instead of panicking in `println!` on EPIPE.
    // SAFETY: restoring a signal's default disposition, before any thread is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    init_logging("info");
    let profile = cli
        .client_config
        .clone()
        .or_else(|| std::env::var_os("STRATA_CLIENT_CONFIG").map(PathBuf::from));
    if let Err(message) = cli::security::configure(&cli.client_settings, profile.as_deref()) {
        eprintln!("strata: {message}");
        std::process::exit(2);
    }
}

/// Runs one command of the CLI.
fn run(command: Command) -> Result<(), String> {
    match command {
        Command::Doctor(args) => doctor(args),
        Command::RecoverMetadata(args) => args
            .settings()
            .and_then(|settings| config::BrokerConfig::from_settings(&settings))
            .and_then(|config| cli::recover_metadata::run(&config)),
        Command::Serve(args) => serve(args),
        Command::Topic { command, bootstrap } => run_topic(command, &bootstrap),
        Command::Cluster { command } => run_cluster(command),
        Command::Cert { command } => match command {
            CertCommand::SelfSigned { out, hosts } => cli::cert::self_signed(&out, &hosts),
        },
        Command::Quota { command, bootstrap } => run_quota(command, &bootstrap),
        Command::Acl { command, bootstrap } => run_acl(command, &bootstrap),
        Command::User { command, bootstrap } => run_user(command, &bootstrap),
        Command::Txn { command, bootstrap } => run_txn(command, &bootstrap),
        Command::Group { command, bootstrap } => run_group(command, &bootstrap),
        Command::Produce { topic, bootstrap, partition, key_separator, acks, format } => {
            run_produce(&bootstrap, topic, partition, key_separator, &acks, format)
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
            format,
            group,
        } => consume_format(format, &separator, print_keys, print_offsets).and_then(|format| {
            let options = cli::consume::ConsumeOptions {
                topic,
                partition,
                offset,
                count,
                exit_at_end,
                format,
                group,
            };
            cli::consume::run(&bootstrap, options)
        }),
    }
}

/// `strata topic ...`.
fn run_topic(command: TopicCommand, bootstrap: &str) -> Result<(), String> {
    match command {
        TopicCommand::Create {
            topic,
            partitions,
            replication_factor,
            config,
            replica_assignment,
        } => cli::topic::create(
            bootstrap,
            &topic,
            partitions,
            replication_factor,
            &config,
            replica_assignment.as_deref(),
        ),
        TopicCommand::List { format } => cli::topic::list(bootstrap, format == OutputFormat::Json),
        TopicCommand::Describe { topic, format } => {
            cli::topic::describe(bootstrap, &topic, format == OutputFormat::Json)
        }
        TopicCommand::AddPartitions { topic, num } => {
            cli::topic::add_partitions(bootstrap, &topic, num)
        }
        TopicCommand::Delete { topic } => cli::topic::delete(bootstrap, &topic),
        TopicCommand::AlterConfig { topic, set, delete } => {
            cli::topic::alter_config(bootstrap, &topic, &set, &delete)
        }
        TopicCommand::Move { topic, partition, to, cancel, wait } => {
            let target = (!cancel).then_some(to);
            cli::topic::move_partition(bootstrap, &topic, partition, target, wait)
        }
    }
}

/// `strata cluster ...`.
fn run_cluster(command: ClusterCommand) -> Result<(), String> {
    match command {
        ClusterCommand::Status { bootstrap, format } => {
            cli::cluster::status(&bootstrap, format == OutputFormat::Json)
        }
        ClusterCommand::Health { bootstrap, watch, exit_when_healthy, interval, format } => {
            let interval = std::time::Duration::from_secs(interval.max(1));
            let json = format == OutputFormat::Json;
            match cli::health::health(&bootstrap, json, watch, exit_when_healthy, interval) {
                Ok(true) => Ok(()),
                // The report says why; exit 1 as rpk's `cluster health` does.
                Ok(false) => std::process::exit(1),
                Err(error) => Err(error),
            }
        }
        ClusterCommand::Partitions { bootstrap, topic, under_replicated, leaderless, format } => {
            cli::health::partitions(
                &bootstrap,
                topic.as_deref(),
                under_replicated,
                leaderless,
                format == OutputFormat::Json,
            )
        }
        ClusterCommand::ElectLeaders { bootstrap, topic, partition, unclean } => {
            cli::cluster_ops::elect_leaders(&bootstrap, topic.as_deref(), &partition, unclean)
        }
        ClusterCommand::Config { command, bootstrap, broker } => match command {
            ConfigCommand::List { format } => {
                cli::cluster_ops::config_list(&bootstrap, broker, format == OutputFormat::Json)
            }
            ConfigCommand::Get { key } => cli::cluster_ops::config_get(&bootstrap, broker, &key),
            ConfigCommand::Set { set, delete } => {
                cli::cluster_ops::config_set(&bootstrap, broker, &set, &delete)
            }
        },
        ClusterCommand::Local { nodes, data_dir, base_port } => {
            cli::cluster::local(nodes, &data_dir, base_port)
        }
    }
}

/// `strata quota ...`.
fn run_quota(command: QuotaCommand, bootstrap: &str) -> Result<(), String> {
    match command {
        QuotaCommand::Set {
            user,
            client_id,
            producer_byte_rate,
            consumer_byte_rate,
            request_percentage,
        } => {
            let rates: Vec<(&str, f64)> = [
                ("producer_byte_rate", producer_byte_rate.map(|rate| rate as f64)),
                ("consumer_byte_rate", consumer_byte_rate.map(|rate| rate as f64)),
                ("request_percentage", request_percentage),
            ]
            .into_iter()
            .filter_map(|(key, rate)| Some((key, rate?)))
            .collect();
            cli::quota::set(bootstrap, user.as_deref(), client_id.as_deref(), &rates)
        }
        QuotaCommand::Delete { user, client_id, key } => {
            cli::quota::delete(bootstrap, user.as_deref(), client_id.as_deref(), &key)
        }
        QuotaCommand::List { format } => cli::quota::list(bootstrap, format == OutputFormat::Json),
    }
}

/// `strata acl ...`.
fn run_acl(command: AclCommand, bootstrap: &str) -> Result<(), String> {
    match command {
        AclCommand::Create { resource, allow_principal, deny_principal, operation, host } => {
            cli::acl::create(
                bootstrap,
                &resource.into(),
                &allow_principal,
                &deny_principal,
                &operation,
                &host,
            )
        }
        AclCommand::List { resource, principal, format } => cli::acl::list(
            bootstrap,
            &resource.into(),
            principal.as_deref(),
            format == OutputFormat::Json,
        ),
        AclCommand::Delete { resource, principal, all } => {
            cli::acl::delete(bootstrap, &resource.into(), principal.as_deref(), all)
        }
    }
}

/// `strata user ...`.
fn run_user(command: UserCommand, bootstrap: &str) -> Result<(), String> {
    match command {
        UserCommand::Create { user, password, mechanism, iterations } => {
            cli::user::create(bootstrap, &user, &password, &mechanism, iterations)
        }
        UserCommand::List { format } => cli::user::list(bootstrap, format == OutputFormat::Json),
        UserCommand::Delete { user, mechanism } => {
            cli::user::delete(bootstrap, &user, mechanism.as_deref())
        }
    }
}

/// `strata txn ...`.
fn run_txn(command: TxnCommand, bootstrap: &str) -> Result<(), String> {
    match command {
        TxnCommand::List { format } => cli::txn::list(bootstrap, format == OutputFormat::Json),
        TxnCommand::Describe { transactional_id, format } => {
            cli::txn::describe(bootstrap, &transactional_id, format == OutputFormat::Json)
        }
        TxnCommand::Abort { transactional_id } => cli::txn::abort(bootstrap, &transactional_id),
    }
}

/// `strata group ...`.
fn run_group(command: GroupCommand, bootstrap: &str) -> Result<(), String> {
    match command {
        GroupCommand::List { format } => cli::group::list(bootstrap, format == OutputFormat::Json),
        GroupCommand::Describe { group, format } => {
            cli::group::describe(bootstrap, &group, format == OutputFormat::Json)
        }
        GroupCommand::Delete { group } => cli::group::delete(bootstrap, &group),
        GroupCommand::DeleteOffsets { group, topic, share } => {
            cli::group::delete_offsets(bootstrap, &group, &topic, share)
        }
        GroupCommand::ResetOffsets {
            group,
            topic,
            to_earliest,
            to_latest,
            to_offset,
            to_timestamp,
            create_group,
            share,
        } => {
            let to = match (to_earliest, to_latest, to_offset, to_timestamp) {
                (true, _, _, _) => Ok(cli::group::ResetTo::Earliest),
                (_, true, _, _) => Ok(cli::group::ResetTo::Latest),
                (_, _, Some(offset), _) => Ok(cli::group::ResetTo::Offset(offset)),
                (_, _, _, Some(timestamp)) => Ok(cli::group::ResetTo::Timestamp(timestamp)),
                _ => Err("choose one of --to-earliest, --to-latest, --to-offset, --to-timestamp"
                    .to_string()),
            };
            to.and_then(|to| {
                cli::group::reset_offsets(bootstrap, &group, &topic, to, create_group, share)
            })
        }
    }
}

/// `strata produce`: checks --acks and --format, then produces stdin's lines.
fn run_produce(
    bootstrap: &str,
    topic: String,
    partition: Option<i32>,
    key_separator: Option<String>,
    acks: &str,
    format: Option<String>,
) -> Result<(), String> {
    let acks = match acks {
        "all" | "-1" => Ok(-1),
        "1" => Ok(1),
        other => Err(format!("--acks {other:?}: use 1 or all")),
    };
    let format = format.as_deref().map(cli::format::Format::parse).transpose();
    acks.and_then(|acks| {
        let format = format?;
        let options =
            cli::produce::ProduceOptions { topic, partition, key_separator, acks, format };
        cli::produce::run(bootstrap, options)
    })
}

/// `strata consume`'s print format: --format, else the one the older flags describe.
fn consume_format(
    format: Option<String>,
    separator: &str,
    print_keys: bool,
    print_offsets: bool,
) -> Result<cli::format::Format, String> {
    // The older flags are formats too: [PARTITION:OFFSET<sep>][KEY<sep>]VALUE.
    let format = format.unwrap_or_else(|| {
        let separator = separator.replace('%', "%%");
        let mut format = String::new();
        if print_offsets {
            format.push_str(&format!("%p:%o{separator}"));
        }
        if print_keys {
            format.push_str(&format!("%k{separator}"));
        }
        format.push_str("%v\\n");
        format
    });
    cli::format::Format::parse(&format)
}

#[derive(Subcommand)]
enum ClusterCommand {
    /// Brokers (live or fenced), the controller leader, and each voter's log end and lag.
    Status {
        #[arg(long, short = 'b', default_value = "localhost:9092")]
        bootstrap: String,
        #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
        format: OutputFormat,
    },
    /// Whether the cluster is healthy: a controller, no broker down (fenced), no partition
    /// leaderless or under-replicated (naming them). Exit 0 when healthy, 1 otherwise.
    Health {
        #[arg(long, short = 'b', default_value = "localhost:9092")]
        bootstrap: String,
        /// Keep watching, printing again on every change.
        #[arg(long, short = 'w')]
        watch: bool,
        /// With --watch: stop (exit 0) once the cluster is healthy.
        #[arg(long, short = 'e')]
        exit_when_healthy: bool,
        /// Seconds between two looks with --watch.
        #[arg(long, default_value_t = 2)]
        interval: u64,
        #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
        format: OutputFormat,
    },
    /// Every partition's leader, replicas and ISR; or only the under-replicated or leaderless.
    Partitions {
        #[arg(long, short = 'b', default_value = "localhost:9092")]
        bootstrap: String,
        #[arg(long, short = 't')]
        topic: Option<String>,
        #[arg(long, short = 'u')]
        under_replicated: bool,
        #[arg(long, short = 'l')]
        leaderless: bool,
        #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
        format: OutputFormat,
    },
    /// Elect leaders: the preferred replica (the first of each partition's replicas) where it is
    /// live and in sync; with --unclean, any live replica of a partition without a leader
    /// (records the old leader had may be lost).
    ElectLeaders {
        #[arg(long, short = 'b', default_value = "localhost:9092")]
        bootstrap: String,
        /// Only this topic's partitions (default: every partition).
        #[arg(long, short = 't')]
        topic: Option<String>,
        /// Only these partitions of --topic (repeatable).
        #[arg(long, short = 'p')]
        partition: Vec<i32>,
        /// Unclean election: may lose acknowledged records. Only when asked for by name.
        #[arg(long)]
        unclean: bool,
    },
    /// Dynamic broker configs: list, get, set (cluster-wide, or one broker's with --broker).
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
        #[arg(long, short = 'b', global = true, default_value = "localhost:9092")]
        bootstrap: String,
        /// One broker's configs (default: the cluster-wide dynamic defaults).
        #[arg(long, global = true)]
        broker: Option<i32>,
    },
    /// Run a cluster of N nodes on loopback ports (node i: Kafka at BASE+100*(i-1), its
    /// controller one port above, /metrics ten above), each `broker,controller`; prints the
    /// bootstrap servers once all are ready. Ctrl-C stops all of them.
    Local {
        #[arg(long, default_value_t = 3)]
        nodes: u32,
        /// Each node's data directory is DIR/node-N, its log DIR/node-N.log.
        #[arg(long)]
        data_dir: PathBuf,
        #[arg(long, default_value_t = 9092)]
        base_port: u16,
    },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Every config of the broker (--broker), or the cluster-wide dynamic ones.
    List {
        #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
        format: OutputFormat,
    },
    /// One config's value.
    Get { key: String },
    /// Set KEY=VALUE (repeatable), delete with --delete KEY.
    Set {
        set: Vec<String>,
        #[arg(long)]
        delete: Vec<String>,
    },
}

/// How list and describe commands print.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum OutputFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum CertCommand {
    /// Write ca.pem, broker.pem (key and chain), client.pem and client.key into a directory.
    SelfSigned {
        /// Where to write them.
        #[arg(long, default_value = "strata-certs")]
        out: std::path::PathBuf,
        /// Names and IP addresses the broker certificate is for (repeat the flag).
        #[arg(long = "host", default_values_t = ["localhost".to_string(), "127.0.0.1".to_string()])]
        hosts: Vec<String>,
    },
}

/// The resource of an ACL command.
#[derive(clap::Args)]
struct AclResourceArgs {
    #[arg(long)]
    topic: Option<String>,
    #[arg(long)]
    group: Option<String>,
    #[arg(long)]
    transactional_id: Option<String>,
    /// The cluster resource (kafka-cluster).
    #[arg(long)]
    cluster: bool,
    /// The name is a prefix (PREFIXED pattern); default LITERAL (`*` alone: every name).
    #[arg(long)]
    prefixed: bool,
}

impl From<AclResourceArgs> for cli::acl::AclResource {
    fn from(args: AclResourceArgs) -> Self {
        cli::acl::AclResource {
            topic: args.topic,
            group: args.group,
            transactional_id: args.transactional_id,
            cluster: args.cluster,
            prefixed: args.prefixed,
        }
    }
}

#[derive(Subcommand)]
enum AclCommand {
    /// Allow or deny principals operations on a resource.
    Create {
        #[command(flatten)]
        resource: AclResourceArgs,
        /// A principal to allow (User:name, or a bare name), repeatable.
        #[arg(long)]
        allow_principal: Vec<String>,
        /// A principal to deny, repeatable (DENY wins over ALLOW).
        #[arg(long)]
        deny_principal: Vec<String>,
        /// Operations, comma-separated: read, write, create, delete, alter, describe,
        /// cluster_action, describe_configs, alter_configs, idempotent_write, all.
        #[arg(long, value_delimiter = ',')]
        operation: Vec<String>,
        /// The client host the ACL applies to.
        #[arg(long, default_value = "*")]
        host: String,
    },
    /// ACLs on a resource and/or of a principal (all of them with no filter).
    List {
        #[command(flatten)]
        resource: AclResourceArgs,
        #[arg(long)]
        principal: Option<String>,
        #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
        format: OutputFormat,
    },
    /// Delete the ACLs on a resource and/or of a principal.
    Delete {
        #[command(flatten)]
        resource: AclResourceArgs,
        #[arg(long)]
        principal: Option<String>,
        /// Delete every ACL (needed when no resource or principal is named).
        #[arg(long)]
        all: bool,
    },
}

#[derive(Subcommand)]
enum QuotaCommand {
    /// Set an entity's byte rates (bytes/s across the broker's shards).
    Set {
        /// A user (principal name; ANONYMOUS without authentication), or <default>.
        #[arg(long)]
        user: Option<String>,
        /// A client id, or <default>.
        #[arg(long)]
        client_id: Option<String>,
        #[arg(long)]
        producer_byte_rate: Option<u64>,
        #[arg(long)]
        consumer_byte_rate: Option<u64>,
        /// The share of a core's request-handling time per second, in percent (KIP-124).
        #[arg(long)]
        request_percentage: Option<f64>,
    },
    /// Remove one of an entity's quotas.
    Delete {
        #[arg(long)]
        user: Option<String>,
        #[arg(long)]
        client_id: Option<String>,
        #[arg(long, default_value = "producer_byte_rate")]
        key: String,
    },
    /// Every entity with a quota.
    List {
        #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
        format: OutputFormat,
    },
}

#[derive(Subcommand)]
enum UserCommand {
    /// Give a user a SCRAM credential (or a new password): salted and hashed here, only the
    /// derived keys are kept by the cluster.
    Create {
        user: String,
        #[arg(long)]
        password: String,
        /// SCRAM-SHA-256 or SCRAM-SHA-512.
        #[arg(long, default_value = "SCRAM-SHA-256")]
        mechanism: String,
        /// PBKDF2 iterations (Kafka accepts 4096 to 16384).
        #[arg(long, default_value_t = 8192)]
        iterations: i32,
    },
    /// Every SCRAM user, with its mechanisms and iterations.
    List {
        #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
        format: OutputFormat,
    },
    /// Remove a user's credential for one mechanism, or for all of them.
    Delete {
        user: String,
        #[arg(long)]
        mechanism: Option<String>,
    },
}

#[derive(Subcommand)]
enum TxnCommand {
    /// Every transactional id on every broker, with its state and producer id.
    List {
        #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
        format: OutputFormat,
    },
    /// A transactional id's state, producer, timeout, open time and partitions.
    Describe {
        transactional_id: String,
        #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
        format: OutputFormat,
    },
    /// Abort the id's open transaction and fence its producer (as a new instance would).
    Abort { transactional_id: String },
}

#[derive(Subcommand)]
enum GroupCommand {
    /// List groups and their states.
    List {
        #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
        format: OutputFormat,
    },
    /// Members, assigned partitions, committed offsets, log end offsets and lag.
    Describe {
        group: String,
        #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
        format: OutputFormat,
    },
    /// Delete a group without members and its committed offsets.
    Delete { group: String },
    /// Delete a group's offsets on one topic (only while the group has no members): a classic
    /// or consumer group's committed offsets, a share group's start offsets (its members then
    /// start from share.auto.offset.reset).
    DeleteOffsets {
        group: String,
        #[arg(long)]
        topic: String,
        /// The group is a share group its coordinator does not know now (none of its members
        /// has come back since the coordinator moved).
        #[arg(long)]
        share: bool,
    },
    /// Move a group's committed offsets on one topic (only while the group has no members);
    /// for a share group, its share-partition start offsets.
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
        /// Create the group with these offsets when it does not exist (without it, an unknown
        /// group is refused: a typo must not create one).
        #[arg(long)]
        create_group: bool,
        /// The group is a share group its coordinator does not know now (none of its members
        /// has come back since the coordinator moved).
        #[arg(long)]
        share: bool,
    },
}

#[derive(Subcommand)]
enum TopicCommand {
    /// Create a topic.
    Create {
        topic: String,
        #[arg(long, short = 'p', default_value_t = 1)]
        partitions: i32,
        /// Replicas per partition (default: the cluster's default.replication.factor).
        #[arg(long, short = 'r', default_value_t = -1)]
        replication_factor: i16,
        /// Topic config, KEY=VALUE (repeatable).
        #[arg(long, short = 'c')]
        config: Vec<String>,
        /// Replicas of each partition, as kafka-topics takes them: broker ids joined by `:`
        /// per partition (the first is the preferred leader), partitions joined by `,`, e.g.
        /// `1:2:3,2:3:1`. Sets the partition count and replication factor.
        #[arg(long, conflicts_with_all = ["partitions", "replication_factor"])]
        replica_assignment: Option<String>,
    },
    /// List topics.
    List {
        #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
        format: OutputFormat,
    },
    /// Show partitions, offsets and configs of a topic.
    Describe {
        topic: String,
        #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
        format: OutputFormat,
    },
    /// Add partitions to a topic (CreatePartitions): keyed records may map to other
    /// partitions afterwards, as in Kafka.
    AddPartitions {
        topic: String,
        /// How many partitions to add.
        #[arg(long, short = 'n')]
        num: i32,
    },
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
    /// Move a partition's replicas to other brokers (a reassignment), or cancel a running move.
    Move {
        topic: String,
        #[arg(long, short = 'p')]
        partition: i32,
        /// The target brokers, comma-separated; the first is the preferred leader.
        #[arg(long, value_delimiter = ',', required_unless_present = "cancel")]
        to: Vec<i32>,
        /// Cancel the running move: back to the replicas before it.
        #[arg(long, conflicts_with = "to")]
        cancel: bool,
        /// Wait up to this many seconds for the move to finish (0: do not wait).
        #[arg(long, default_value_t = 0)]
        wait: u64,
    },
}

/// `strata serve` flags. Each sets one configuration key (shown in brackets); flags win over
/// `STRATA_*` environment variables, which win over the `--config` file, which wins over the
/// defaults (every key with its default: deploy/strata.toml).
#[derive(clap::Args)]
struct ServeArgs {
    /// TOML configuration file (default: $STRATA_CONFIG, else none).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Set any configuration key, KEY=VALUE (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Where partitions and metadata live [log.dirs].
    #[arg(long)]
    data_dir: Option<String>,
    /// Kafka listener, HOST:PORT [listeners].
    #[arg(long)]
    listen: Option<String>,
    /// HOST:PORT returned in Metadata [advertised.listeners].
    #[arg(long)]
    advertise: Option<String>,
    /// HTTP listener for /metrics and /health [admin.listener].
    #[arg(long)]
    admin_listen: Option<String>,
    /// Shards, one per allowed core, or all [num.cores].
    #[arg(long)]
    cores: Option<String>,
    /// [node.id]
    #[arg(long)]
    node_id: Option<String>,
    /// true or false [auto.create.topics.enable].
    #[arg(long)]
    auto_create_topics: Option<String>,
    /// Partitions of auto-created topics [num.partitions].
    #[arg(long)]
    num_partitions: Option<String>,
    /// Largest request frame [socket.request.max.bytes].
    #[arg(long)]
    request_bytes_max: Option<String>,
    /// Per-shard batch cache, bytes [log.cache.bytes].
    #[arg(long)]
    cache_bytes: Option<String>,
    /// [log.retention.check.interval.ms]
    #[arg(long)]
    retention_check_interval_ms: Option<String>,
    /// [group.initial.rebalance.delay.ms]
    #[arg(long)]
    group_initial_rebalance_delay_ms: Option<String>,
    /// [offsets.retention.ms]
    #[arg(long)]
    offsets_retention_ms: Option<String>,
    /// [offsets.compact.bytes]
    #[arg(long)]
    offsets_compact_bytes: Option<String>,
    /// error, warn, info, debug or trace [log.level].
    #[arg(long)]
    log_level: Option<String>,
}

impl ServeArgs {
    /// Resolves the configuration: defaults < file < environment < flags.
    fn settings(self) -> Result<config::sources::Settings, String> {
        let mut flags: Vec<(&'static str, String, String)> = Vec::new();
        for (value, flag, key) in [
            (self.data_dir, "--data-dir", "log.dirs"),
            (self.listen, "--listen", "listeners"),
            (self.advertise, "--advertise", "advertised.listeners"),
            (self.admin_listen, "--admin-listen", "admin.listener"),
            (self.cores, "--cores", "num.cores"),
            (self.node_id, "--node-id", "node.id"),
            (self.auto_create_topics, "--auto-create-topics", "auto.create.topics.enable"),
            (self.num_partitions, "--num-partitions", "num.partitions"),
            (self.request_bytes_max, "--request-bytes-max", "socket.request.max.bytes"),
            (self.cache_bytes, "--cache-bytes", "log.cache.bytes"),
            (
                self.retention_check_interval_ms,
                "--retention-check-interval-ms",
                "log.retention.check.interval.ms",
            ),
            (
                self.group_initial_rebalance_delay_ms,
                "--group-initial-rebalance-delay-ms",
                "group.initial.rebalance.delay.ms",
            ),
            (self.offsets_retention_ms, "--offsets-retention-ms", "offsets.retention.ms"),
            (self.offsets_compact_bytes, "--offsets-compact-bytes", "offsets.compact.bytes"),
            (self.log_level, "--log-level", "log.level"),
        ] {
            if let Some(value) = value {
                flags.push((key, flag.to_string(), value));
            }
        }
        for pair in self.set {
            let (name, value) =
                pair.split_once('=').ok_or_else(|| format!("--set {pair:?}: use KEY=VALUE"))?;
            let key = config::keys::find(name.trim())
                .ok_or_else(|| format!("--set {pair:?}: unknown key {:?}", name.trim()))?;
            flags.push((key.name, "--set".to_string(), value.to_string()));
        }
        let file = self.config.or_else(|| std::env::var_os("STRATA_CONFIG").map(PathBuf::from));
        config::sources::resolve(file.as_deref(), &|name| std::env::var(name).ok(), &flags)
    }
}

/// Logs where the configuration came from and every setting that is not a default.
fn log_startup(settings: &config::sources::Settings, config: &config::BrokerConfig) {
    let overrides: Vec<String> = settings
        .values
        .iter()
        .filter(|(_, (_, source))| *source != config::sources::Source::Default)
        .map(|(name, (value, source))| {
            // Secrets (PLAIN's passwords in sasl.jaas.config) are never logged.
            let value = if config::keys::is_secret(name) { "[hidden]" } else { value.as_str() };
            format!("{name}={value} ({source})")
        })
        .collect();
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        config_file = %settings.file.as_ref().map_or("none".to_string(), |p| p.display().to_string()),
        shards = config.cores,
        pinned_cpus = ?runtime::allowed_cpus().into_iter().take(config.cores).collect::<Vec<_>>(),
        data_dir = %config.data_dir.display(),
        listener = %config.listen,
        advertised = %format!("{}:{}", config.advertise_host, config.advertise_port),
        admin = %config.admin_listen,
        settings = %overrides.join(", "),
        "strata starting"
    );
}

fn doctor(args: Box<ServeArgs>) -> Result<(), String> {
    let settings = args.settings()?;
    let config = config::BrokerConfig::from_settings(&settings)?;
    cli::doctor::run(&config)
}
