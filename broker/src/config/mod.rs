//! Broker settings for `strata serve`: `keys` lists every key, `sources` merges the defaults,
//! the TOML file, `STRATA_*` environment variables and flags; `BrokerConfig` is the result.

pub mod cluster;
pub mod keys;
pub mod security;
pub mod sources;
pub mod tls;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

/// A client listener the broker serves (Kafka's `listeners` entry with its security protocol
/// and advertised address).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientListener {
    pub name: String,
    /// TLS on this listener (`SSL`, `SASL_SSL`).
    pub tls: bool,
    /// SASL authentication on this listener (`SASL_PLAINTEXT`, `SASL_SSL`).
    pub sasl: bool,
    pub listen: SocketAddr,
    pub advertise_host: String,
    pub advertise_port: i32,
}

#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub node_id: i32,
    pub data_dir: PathBuf,
    /// The primary client listener's (the inter-broker one's) address and advertised address.
    pub listen: SocketAddr,
    pub advertise_host: String,
    pub advertise_port: i32,
    /// Every client listener, the primary first.
    pub listeners: Vec<ClientListener>,
    /// `ssl.*`, read when a listener is SSL.
    pub tls: Option<security::TlsSettings>,
    /// `sasl.*`, read when a listener is SASL.
    pub sasl: Option<security::SaslSettings>,
    /// `authorizer.class.name`, `super.users`, `allow.everyone.if.no.acl.found`.
    pub authorizer: crate::authorization::Authorizer,
    /// How this broker reaches the others' inter-broker listener (TLS, SASL login), from
    /// that listener's protocol (issue #18).
    pub inter_broker_security: security::PeerSecurity,
    /// How this node reaches the controllers, from the controller listener's protocol; its
    /// own controller listener asks the same of the nodes that connect.
    pub controller_security: security::PeerSecurity,
    /// The PLAIN users that may log in on a SASL controller listener (`sasl.jaas.config`'s);
    /// only this node's own login and `super.users` are accepted among them.
    pub controller_users: BTreeMap<String, String>,
    pub admin_listen: SocketAddr,
    /// The web console on the admin listener (`console.*`).
    pub console: ConsoleSettings,
    pub cores: usize,
    pub auto_create_topics: bool,
    pub num_partitions: i32,
    /// `default.replication.factor`: auto-created topics' and CreateTopics' -1.
    pub default_replication_factor: i32,
    /// `socket.request.max.bytes`.
    pub request_bytes_max: usize,
    /// `queued.max.request.bytes`, for the whole broker.
    pub queued_request_bytes_max: u64,
    /// `connections.max.idle.ms`; `None` (-1): never.
    pub connections_idle_ms: Option<u64>,
    /// `socket.request.frame.timeout.ms` (strata).
    pub frame_timeout_ms: u64,
    /// `max.connections`.
    pub max_connections: usize,
    /// `max.connections.per.ip`.
    pub max_connections_per_ip: usize,
    /// Per-shard batch cache budget.
    pub cache_bytes: usize,
    /// Per-shard write-buffer budget (`log.write.buffer.bytes`).
    pub write_buffer_bytes: usize,
    /// Segment files each shard keeps open, from the open-files limit at start
    /// (`metadata::file_budget::segment_files_per_shard`; not a key).
    pub segment_files_per_shard: usize,
    /// Kafka's `log.retention.check.interval.ms`.
    pub retention_check_interval_ms: i64,
    /// Kafka's `group.initial.rebalance.delay.ms`.
    pub initial_rebalance_delay_ms: u64,
    /// Kafka's `group.consumer.*` (KIP-848 consumer groups).
    pub consumer_groups: ConsumerGroupSettings,
    /// `broker.heartbeat.interval.ms` and `broker.session.timeout.ms` (a cluster's).
    pub heartbeat_interval_ms: u64,
    pub session_timeout_ms: u64,
    /// Kafka's `offsets.topic.replication.factor` (a cluster's).
    pub offsets_topic_replication_factor: i32,
    /// Kafka's `transaction.state.log.replication.factor` (a cluster's).
    pub transaction_state_replication_factor: i32,
    /// Kafka's `transaction.state.log.min.isr`.
    pub transaction_state_min_isr: i32,
    /// Kafka's `transaction.max.timeout.ms`.
    pub transaction_max_timeout_ms: i32,
    /// Kafka's `transaction.abort.timed.out.transaction.cleanup.interval.ms`.
    pub transaction_abort_interval_ms: u64,
    /// Kafka's `transactional.id.expiration.ms`.
    pub transactional_id_expiration_ms: i64,
    /// Kafka's `transaction.partition.verification.enable` (KIP-890 part 1).
    pub transaction_partition_verification: bool,
    /// KIP-1191: share groups' dead-letter topics.
    pub dead_letters: DeadLetterSettings,
    /// `group.share.partition.idle.ms` (strata): how long an unused share partition stays in
    /// its leader's memory.
    pub share_partition_idle_ms: i64,
    /// Kafka's `transaction.remove.expired.transaction.cleanup.interval.ms`.
    pub transaction_expiry_interval_ms: i64,
    /// Kafka's `replica.lag.time.max.ms`: how long a follower may go without catching up
    /// before its leader takes it out of the ISR.
    pub replica_lag_time_max_ms: u64,
    /// `auto.leader.rebalance.enable` and `leader.imbalance.check.interval.seconds`: how
    /// often the active controller runs preferred elections (`None`: never).
    pub leader_rebalance_interval_ms: Option<u64>,
    /// `cpu.pinning`.
    pub pin_cpus: bool,
    /// Kafka's `offsets.retention.minutes`, in milliseconds: committed offsets of groups
    /// without members expire this long after their last commit.
    pub offsets_retention_ms: u64,
    /// An `__consumer_offsets` partition larger than this is compacted (strata-specific).
    pub offsets_compact_bytes: u64,
    /// Broker-wide topic config defaults (`log.retention.ms` → `retention.ms`, ...).
    pub topic_defaults: BTreeMap<String, String>,
    pub log_level: String,
    /// The cluster keys (roles, voters, listeners, rack), checked against each other.
    pub cluster: cluster::ClusterConfig,
}

impl BrokerConfig {
    /// Builds the config from checked settings (`sources::resolve`).
    pub fn from_settings(settings: &sources::Settings) -> Result<Self, String> {
        let node_id = integer_setting(settings, "node.id")? as i32;
        let cluster = cluster::ClusterConfig::from_keys(&cluster::ClusterKeys {
            node_id,
            roles: settings.get("process.roles"),
            voters: settings.get("controller.quorum.voters"),
            controller_listener_names: settings.get("controller.listener.names"),
            listeners: settings.get("listeners"),
            protocol_map: settings.get("listener.security.protocol.map"),
            inter_broker_listener: settings.get("inter.broker.listener.name"),
            rack: settings.get("broker.rack"),
        })?;
        let listeners = client_listeners(settings, &cluster)?;
        let primary = listeners
            .first()
            .cloned()
            .ok_or("listeners: no client listener (every one is a controller listener)")?;
        // The controller listener's protocol (a cluster's; a single node has no controller).
        let controller_protocol = cluster
            .controller_listener_names
            .first()
            .and_then(|name| cluster.protocol_map.get(name))
            .filter(|_| !cluster.voters.is_empty())
            .map_or("PLAINTEXT", String::as_str);
        let controller_tls = controller_protocol == "SSL" || controller_protocol == "SASL_SSL";
        let tls = if listeners.iter().any(|listener| listener.tls) || controller_tls {
            Some(tls_settings(settings)?)
        } else {
            None
        };
        let sasl = if listeners.iter().any(|listener| listener.sasl) {
            Some(sasl_settings(settings)?)
        } else {
            None
        };
        let cores = match settings.get("num.cores").trim() {
            "all" => shard::runtime::available_cores(),
            value => value.parse().map_err(|_| format!("num.cores = {value:?}"))?,
        };
        let offsets_retention_ms = match settings.get("offsets.retention.ms").trim() {
            "" => integer_setting(settings, "offsets.retention.minutes")? as u64 * 60_000,
            value => value.parse().map_err(|_| format!("offsets.retention.ms = {value:?}"))?,
        };
        let data_dir = absolute_path(settings.get("log.dirs").trim())?;
        let admin_listen = address_setting(settings, "admin.listener")?;
        let peers = Peers::from_settings(settings, &cluster, controller_protocol, tls.as_ref())?;
        let resolved = Resolved {
            node_id,
            cluster,
            primary,
            listeners,
            tls,
            sasl,
            cores,
            offsets_retention_ms,
            data_dir,
            admin_listen,
            peers,
        };
        Self::with_plain_keys(settings, resolved)
    }

    /// Completes the config with the keys read as they are (flags, limits, intervals).
    fn with_plain_keys(settings: &sources::Settings, resolved: Resolved) -> Result<Self, String> {
        let integer = |name: &str| integer_setting(settings, name);
        let topic_defaults = keys::TOPIC_DEFAULTS
            .iter()
            .map(|(broker_key, topic_key)| {
                (topic_key.to_string(), settings.get(broker_key).trim().to_string())
            })
            .collect();
        Ok(BrokerConfig {
            node_id: resolved.node_id,
            data_dir: resolved.data_dir,
            listen: resolved.primary.listen,
            advertise_host: resolved.primary.advertise_host,
            advertise_port: resolved.primary.advertise_port,
            listeners: resolved.listeners,
            tls: resolved.tls,
            sasl: resolved.sasl,
            admin_listen: resolved.admin_listen,
            console: console_settings(settings)?,
            cores: resolved.cores,
            inter_broker_security: resolved.peers.inter_broker_security,
            controller_security: resolved.peers.controller_security,
            controller_users: resolved.peers.controller_users,
            auto_create_topics: settings.get("auto.create.topics.enable").trim() == "true",
            authorizer: security::authorizer(
                settings.get("authorizer.class.name"),
                settings.get("super.users"),
                settings.get("allow.everyone.if.no.acl.found"),
            )?,
            num_partitions: integer("num.partitions")? as i32,
            default_replication_factor: integer("default.replication.factor")? as i32,
            request_bytes_max: integer("socket.request.max.bytes")? as usize,
            queued_request_bytes_max: integer("queued.max.request.bytes")? as u64,
            connections_idle_ms: u64::try_from(integer("connections.max.idle.ms")?).ok(),
            frame_timeout_ms: integer("socket.request.frame.timeout.ms")? as u64,
            max_connections: integer("max.connections")? as usize,
            max_connections_per_ip: integer("max.connections.per.ip")? as usize,
            cache_bytes: integer("log.cache.bytes")? as usize,
            write_buffer_bytes: integer("log.write.buffer.bytes")? as usize,
            segment_files_per_shard: shard::open_files::SEGMENT_FILES_OPEN_DEFAULT,
            retention_check_interval_ms: integer("log.retention.check.interval.ms")?,
            initial_rebalance_delay_ms: integer("group.initial.rebalance.delay.ms")? as u64,
            consumer_groups: consumer_group_settings(settings)?,
            heartbeat_interval_ms: integer("broker.heartbeat.interval.ms")? as u64,
            session_timeout_ms: integer("broker.session.timeout.ms")? as u64,
            replica_lag_time_max_ms: integer("replica.lag.time.max.ms")? as u64,
            offsets_topic_replication_factor: integer("offsets.topic.replication.factor")? as i32,
            transaction_state_replication_factor: integer(
                "transaction.state.log.replication.factor",
            )? as i32,
            transaction_state_min_isr: integer("transaction.state.log.min.isr")? as i32,
            transaction_max_timeout_ms: integer("transaction.max.timeout.ms")? as i32,
            transaction_abort_interval_ms: integer(
                "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            )? as u64,
            transactional_id_expiration_ms: integer("transactional.id.expiration.ms")?,
            share_partition_idle_ms: integer("group.share.partition.idle.ms")?,
            transaction_partition_verification: settings
                .get("transaction.partition.verification.enable")
                .trim()
                == "true",
            dead_letters: DeadLetterSettings::from_settings(settings),
            transaction_expiry_interval_ms: integer(
                "transaction.remove.expired.transaction.cleanup.interval.ms",
            )?,
            leader_rebalance_interval_ms: (settings.get("auto.leader.rebalance.enable").trim()
                == "true")
                .then_some(integer("leader.imbalance.check.interval.seconds")? as u64 * 1000),
            pin_cpus: settings.get("cpu.pinning").trim() == "true",
            offsets_retention_ms: resolved.offsets_retention_ms,
            offsets_compact_bytes: integer("offsets.compact.bytes")? as u64,
            topic_defaults,
            log_level: settings.get("log.level").trim().to_string(),
            cluster: resolved.cluster,
        })
    }
}

/// `errors.deadletterqueue.topic.name.prefix` and
/// `errors.deadletterqueue.auto.create.topics.enable` (KIP-1191).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterSettings {
    pub prefix: String,
    pub auto_create: bool,
}

impl DeadLetterSettings {
    fn from_settings(settings: &sources::Settings) -> Self {
        DeadLetterSettings {
            prefix: settings.get("errors.deadletterqueue.topic.name.prefix").to_string(),
            auto_create: settings.get("errors.deadletterqueue.auto.create.topics.enable").trim()
                == "true",
        }
    }
}

/// Kafka's `group.consumer.*` keys (KIP-848 consumer groups), checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupSettings {
    pub session_timeout_ms: i32,
    pub heartbeat_interval_ms: i32,
    pub max_size: usize,
    /// The server assignors offered, the first the default (`uniform`, `range`).
    pub assignors: Vec<String>,
    /// `bidirectional`, `upgrade`, `downgrade` or `disabled`.
    pub migration_policy: String,
}

/// The server assignors strata has.
pub const CONSUMER_GROUP_ASSIGNORS: [&str; 2] = ["uniform", "range"];
const MIGRATION_POLICIES: [&str; 4] = ["bidirectional", "upgrade", "downgrade", "disabled"];

/// The `group.consumer.*` keys.
/// The web console's settings (`console.*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleSettings {
    pub enabled: bool,
    /// Host header values answered besides loopback and this node's own addresses.
    pub allowed_hosts: Vec<String>,
    pub session_idle_ms: u64,
    pub session_max_ms: u64,
    pub chart_interval_ms: u64,
}

fn console_settings(settings: &sources::Settings) -> Result<ConsoleSettings, String> {
    let integer = |name: &str| integer_setting(settings, name);
    Ok(ConsoleSettings {
        enabled: settings.get("console.enabled").trim() == "true",
        allowed_hosts: settings
            .get("console.allowed.hosts")
            .split(',')
            .map(|host| host.trim().to_ascii_lowercase())
            .filter(|host| !host.is_empty())
            .collect(),
        session_idle_ms: integer("console.session.idle.ms")? as u64,
        session_max_ms: integer("console.session.max.ms")? as u64,
        chart_interval_ms: integer("console.chart.interval.ms")? as u64,
    })
}

fn consumer_group_settings(settings: &sources::Settings) -> Result<ConsumerGroupSettings, String> {
    let integer = |name: &str| integer_setting(settings, name);
    let mut assignors = Vec::new();
    for name in settings.get("group.consumer.assignors").split(',').map(str::trim) {
        if !CONSUMER_GROUP_ASSIGNORS.contains(&name) {
            return Err(format!(
                "group.consumer.assignors: unknown assignor {name:?} (uniform, range)"
            ));
        }
        assignors.push(name.to_string());
    }
    let policy = settings.get("group.consumer.migration.policy").trim().to_ascii_lowercase();
    if !MIGRATION_POLICIES.contains(&policy.as_str()) {
        return Err(format!(
            "group.consumer.migration.policy: {policy:?} is not bidirectional, upgrade, downgrade or disabled"
        ));
    }
    Ok(ConsumerGroupSettings {
        session_timeout_ms: integer("group.consumer.session.timeout.ms")? as i32,
        heartbeat_interval_ms: integer("group.consumer.heartbeat.interval.ms")? as i32,
        max_size: integer("group.consumer.max.size")? as usize,
        assignors,
        migration_policy: policy,
    })
}

/// What `from_settings` reads before the plain keys, in the order it reports their errors:
/// the cluster keys, the listeners and their security, the cores and the data directory.
struct Resolved {
    node_id: i32,
    cluster: cluster::ClusterConfig,
    /// The inter-broker listener: the address a cluster registers.
    primary: ClientListener,
    listeners: Vec<ClientListener>,
    tls: Option<security::TlsSettings>,
    sasl: Option<security::SaslSettings>,
    cores: usize,
    offsets_retention_ms: u64,
    data_dir: PathBuf,
    admin_listen: SocketAddr,
    peers: Peers,
}

/// How this node reaches the other brokers and the controllers, and who may log in to its
/// own controller listener.
struct Peers {
    inter_broker_security: security::PeerSecurity,
    controller_security: security::PeerSecurity,
    controller_users: BTreeMap<String, String>,
}

impl Peers {
    /// Reads the peers' security from the inter-broker and controller listeners' protocols.
    fn from_settings(
        settings: &sources::Settings,
        cluster: &cluster::ClusterConfig,
        controller_protocol: &str,
        tls: Option<&security::TlsSettings>,
    ) -> Result<Self, String> {
        let inter_broker_security = if cluster.voters.is_empty() {
            security::PeerSecurity::default()
        } else {
            security::PeerSecurity::for_protocol(
                cluster
                    .protocol_map
                    .get(&cluster.inter_broker_listener)
                    .map_or("PLAINTEXT", String::as_str),
                &cluster.inter_broker_listener,
                tls,
                settings.get("sasl.jaas.config"),
                "sasl.mechanism.inter.broker.protocol",
                settings.get("sasl.mechanism.inter.broker.protocol"),
            )?
        };
        let controller_security = security::PeerSecurity::for_protocol(
            controller_protocol,
            cluster.controller_listener_names.first().map_or("CONTROLLER", String::as_str),
            tls,
            settings.get("sasl.jaas.config"),
            "sasl.mechanism.controller.protocol",
            settings.get("sasl.mechanism.controller.protocol"),
        )?;
        let controller_users = if controller_protocol.starts_with("SASL_") {
            security::plain_users(settings.get("sasl.jaas.config"))?
        } else {
            BTreeMap::new()
        };
        Ok(Peers { inter_broker_security, controller_security, controller_users })
    }
}

/// An integer setting, or an error naming its key.
fn integer_setting(settings: &sources::Settings, name: &str) -> Result<i64, String> {
    settings.get(name).trim().parse().map_err(|_| format!("{name}: not an integer"))
}

/// A `HOST:PORT` setting (a listener scheme allowed) resolved to a socket address.
fn address_setting(settings: &sources::Settings, name: &str) -> Result<SocketAddr, String> {
    let value = keys::strip_listener_scheme(settings.get(name).trim());
    resolve_address(value).map_err(|e| format!("{name} = {value:?}: {e}"))
}

/// The client listeners, the inter-broker one (the primary: the address a cluster
/// registers) first, each with its advertised address and security protocol.
fn client_listeners(
    settings: &sources::Settings,
    cluster: &cluster::ClusterConfig,
) -> Result<Vec<ClientListener>, String> {
    let advertised = cluster::parse_listeners(settings.get("advertised.listeners"))
        .map_err(|e| format!("advertised.listeners: {e}"))?;
    let mut listeners = Vec::new();
    for client in cluster.client_listeners() {
        let listen = resolve_address(&join_host_port(&client.host, client.port))
            .map_err(|e| format!("listeners = {:?}: {e}", settings.get("listeners")))?;
        let (advertise_host, advertise_port) =
            match advertised.iter().find(|a| a.name == client.name) {
                Some(entry) => (entry.host.clone(), i32::from(entry.port)),
                None if advertised.is_empty() || !listeners.is_empty() => default_advertise(listen),
                None => {
                    return Err(format!(
                        "advertised.listeners has no entry for the listener {}",
                        client.name
                    ))
                }
            };
        let protocol = cluster.protocol_map.get(&client.name).map_or("", String::as_str);
        let listener = ClientListener {
            name: client.name.clone(),
            tls: protocol == "SSL" || protocol == "SASL_SSL",
            sasl: protocol.starts_with("SASL_"),
            listen,
            advertise_host,
            advertise_port,
        };
        if client.name == cluster.inter_broker_listener {
            listeners.insert(0, listener);
        } else {
            listeners.push(listener);
        }
    }
    Ok(listeners)
}

/// The `ssl.*` settings, read when a listener (or the controller's) is SSL.
fn tls_settings(settings: &sources::Settings) -> Result<security::TlsSettings, String> {
    if settings.get("ssl.keystore.type").trim() != "PEM" {
        return Err(format!(
            "ssl.keystore.type = {:?}: strata reads PEM keystores only (KIP-651)",
            settings.get("ssl.keystore.type")
        ));
    }
    let keystore = settings.get("ssl.keystore.location").trim();
    if keystore.is_empty() {
        return Err("an SSL listener needs ssl.keystore.location (PEM: the private key \
                    and its certificate chain)"
            .into());
    }
    let truststore = settings.get("ssl.truststore.location").trim();
    let rules = settings.get("ssl.principal.mapping.rules").trim();
    if rules != "DEFAULT" {
        return Err(format!(
            "ssl.principal.mapping.rules = {rules:?}: only DEFAULT (the subject's full \
             distinguished name) in this build"
        ));
    }
    Ok(security::TlsSettings {
        keystore: std::path::absolute(keystore)
            .map_err(|e| format!("ssl.keystore.location: {e}"))?,
        truststore: (!truststore.is_empty())
            .then(|| std::path::absolute(truststore))
            .transpose()
            .map_err(|e| format!("ssl.truststore.location: {e}"))?,
        client_auth: security::ClientAuth::parse(settings.get("ssl.client.auth"))?,
    })
}

/// The `sasl.*` settings, read when a listener is SASL.
fn sasl_settings(settings: &sources::Settings) -> Result<security::SaslSettings, String> {
    let mechanisms: Vec<String> = settings
        .get("sasl.enabled.mechanisms")
        .split(',')
        .map(|m| m.trim().to_string())
        .filter(|m| !m.is_empty())
        .collect();
    if let Some(unknown) = mechanisms.iter().find(|m| !security::MECHANISMS.contains(&m.as_str())) {
        return Err(format!(
            "sasl.enabled.mechanisms: {unknown} is not offered (this build: {})",
            security::MECHANISMS.join(", ")
        ));
    }
    if mechanisms.is_empty() {
        return Err("sasl.enabled.mechanisms: a SASL listener needs a mechanism".into());
    }
    let plain_users = security::plain_users(settings.get("sasl.jaas.config"))?;
    Ok(security::SaslSettings {
        mechanisms,
        plain_users,
        max_receive_bytes: integer_setting(settings, "sasl.server.max.receive.size")? as usize,
        failure_delay_ms: integer_setting(settings, "connection.failed.authentication.delay.ms")?
            as u64,
        reauth_ms: integer_setting(settings, "connections.max.reauth.ms")? as u64,
    })
}

/// A path option made absolute against the working directory (the default `./strata-data`
/// included), so logs, DescribeLogDirs and the storage layer all see one absolute path.
fn absolute_path(value: &str) -> Result<PathBuf, String> {
    std::path::absolute(value).map_err(|e| format!("log.dirs = {value:?}: {e}"))
}

/// `HOST:PORT` to a socket address (names are resolved, e.g. `localhost:9092`).
fn resolve_address(value: &str) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs;
    value
        .to_socket_addrs()
        .map_err(|e| e.to_string())?
        .next()
        .ok_or_else(|| "resolves to no address".to_string())
}

/// `host:port`, with an IPv6 host in brackets.
fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// deploy/strata.toml documents every key once, with its default where it is commented out,
    /// and is itself a valid configuration.
    #[test]
    fn the_reference_file_lists_every_key_with_its_default() {
        let text = include_str!("../../../deploy/strata.toml");
        for key in keys::KEYS {
            let lines: Vec<&str> = text
                .lines()
                .filter(|line| {
                    let line = line.trim_start_matches("# ");
                    line.split_once(" = ").is_some_and(|(name, _)| name == key.name)
                })
                .collect();
            assert_eq!(lines.len(), 1, "{} appears once: {lines:?}", key.name);
            if let Some(commented) = lines[0].strip_prefix("# ") {
                let (_, value) = commented.split_once(" = ").unwrap_or_default();
                assert_eq!(value.trim_matches('"'), key.default, "default of {}", key.name);
            }
        }
        let path =
            std::env::temp_dir().join(format!("strata-reference-{}.toml", std::process::id()));
        std::fs::write(&path, text).expect("write");
        let settings = sources::resolve(Some(&path), &|_| None, &[]);
        let _ = std::fs::remove_file(&path);
        let settings = settings.expect("the reference file is valid");
        assert_eq!(settings.get("log.dirs"), "/var/lib/strata");
    }
}
