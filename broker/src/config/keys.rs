//! Every broker configuration key: its Kafka name (where Kafka has one), default, valid range
//! and meaning. `deploy/strata.toml` documents the same table (a test checks they agree).

/// What values a key takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Integer {
        min: i64,
        max: i64,
    },
    Boolean,
    Path,
    /// `HOST:PORT` (a `PLAINTEXT://` prefix, as in Kafka's listeners, is accepted).
    Address,
    /// Kafka's listener list: `NAME://HOST:PORT` or `HOST:PORT` (PLAINTEXT), comma-separated;
    /// `empty` says whether none at all is allowed.
    Listeners {
        empty: bool,
    },
    /// `broker`, `controller` or `broker,controller`.
    Roles,
    /// `ID@HOST:PORT,...` or empty.
    Voters,
    /// Listener names, comma-separated (`one`: exactly one).
    Names {
        one: bool,
    },
    /// `NAME:PROTOCOL,...`.
    ProtocolMap,
    /// Any text.
    Text,
    /// `error`, `warn`, `info`, `debug`, `trace`.
    Level,
    /// `always`, `never` or `interval:<ms>`.
    FlushPolicy,
    /// A number of cores, or `all`.
    Cores,
    /// `delete`, `compact` or `compact,delete`.
    CleanupPolicy,
}

pub struct Key {
    pub name: &'static str,
    pub default: &'static str,
    pub kind: Kind,
    pub help: &'static str,
}

const fn int(min: i64, max: i64) -> Kind {
    Kind::Integer { min, max }
}

pub const KEYS: &[Key] = &[
    Key { name: "node.id", default: "0", kind: int(0, i32::MAX as i64), help: "This broker's id (Kafka's node.id / broker.id)." },
    Key { name: "log.dirs", default: "./strata-data", kind: Kind::Path, help: "The data directory (one)." },
    Key { name: "process.roles", default: "broker,controller", kind: Kind::Roles, help: "This node's roles: broker, controller or broker,controller (Kafka has no default)." },
    Key { name: "controller.quorum.voters", default: "", kind: Kind::Voters, help: "The controller quorum, ID@HOST:PORT,... (empty: this node is a one-node cluster of itself)." },
    Key { name: "controller.listener.names", default: "CONTROLLER", kind: Kind::Names { one: false }, help: "Listener names the controller uses; without such an entry in listeners, the controller listens on this node's address in controller.quorum.voters." },
    Key { name: "listeners", default: "0.0.0.0:9092", kind: Kind::Listeners { empty: false }, help: "The listeners, NAME://HOST:PORT or HOST:PORT (PLAINTEXT), comma-separated." },
    Key { name: "advertised.listeners", default: "", kind: Kind::Listeners { empty: true }, help: "HOST:PORT clients are told to use, per listener (default: the listener, or localhost:PORT when it is 0.0.0.0)." },
    Key { name: "listener.security.protocol.map", default: crate::config::cluster::DEFAULT_PROTOCOL_MAP, kind: Kind::ProtocolMap, help: "Each listener name's security protocol, NAME:PROTOCOL,..." },
    Key { name: "ssl.keystore.type", default: "PEM", kind: Kind::Text, help: "The keystore format of SSL listeners: PEM only (KIP-651)." },
    Key { name: "ssl.keystore.location", default: "", kind: Kind::Text, help: "PEM file with the private key (unencrypted) and the certificate chain of SSL listeners." },
    Key { name: "ssl.truststore.location", default: "", kind: Kind::Text, help: "PEM file with the CA certificates client certificates are checked against (ssl.client.auth)." },
    Key { name: "ssl.client.auth", default: "none", kind: Kind::Text, help: "Client certificates on SSL listeners: none, requested (checked when given) or required (a client without a valid one fails the handshake)." },
    Key { name: "ssl.principal.mapping.rules", default: "DEFAULT", kind: Kind::Text, help: "How a client certificate's subject becomes a principal: DEFAULT, the full distinguished name (RFC 2253), as Kafka." },
    Key { name: "sasl.enabled.mechanisms", default: "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512", kind: Kind::Text, help: "SASL mechanisms SASL listeners offer, comma-separated, of PLAIN (users from sasl.jaas.config), SCRAM-SHA-256 and SCRAM-SHA-512 (users in the cluster metadata: strata user create, or AlterUserScramCredentials). strata's default offers all three; Kafka's, GSSAPI, is not offered." },
    Key { name: "sasl.jaas.config", default: "", kind: Kind::Text, help: "PLAIN's users, as Kafka's PlainLoginModule JAAS line: org.apache.kafka.common.security.plain.PlainLoginModule required user_NAME=\"PASSWORD\" ...;" },
    Key { name: "sasl.server.max.receive.size", default: "524288", kind: int(1, 104_857_600), help: "The largest request a SASL listener reads before the client authenticated." },
    Key { name: "connection.failed.authentication.delay.ms", default: "100", kind: int(0, 60_000), help: "How long a connection whose authentication failed stays open (answered, then closed) before it is closed." },
    Key { name: "connections.max.reauth.ms", default: "0", kind: int(0, i64::MAX), help: "A SASL session's lifetime: clients re-authenticate on the same connection before it ends (KIP-368), else the connection is closed at their next request. 0 (Kafka's default): sessions never expire." },
    Key { name: "authorizer.class.name", default: "", kind: Kind::Text, help: "Any non-empty value turns ACL authorization on (strata has one authorizer; Kafka's class names, e.g. org.apache.kafka.metadata.authorizer.StandardAuthorizer, are accepted as they are). Empty: every client may do everything." },
    Key { name: "super.users", default: "", kind: Kind::Text, help: "Principals allowed everything when the authorizer is on, semicolon-separated: User:admin;User:CN=broker,O=acme." },
    Key { name: "allow.everyone.if.no.acl.found", default: "false", kind: Kind::Boolean, help: "With the authorizer on, allow an operation on a resource that no ACL covers (Kafka's default, false, denies it)." },
    Key { name: "sasl.mechanism.inter.broker.protocol", default: "PLAIN", kind: Kind::Text, help: "The SASL mechanism brokers log in to each other's SASL inter-broker listener with, as sasl.jaas.config's username and password: PLAIN in this build (Kafka's default, GSSAPI, is not offered)." },
    Key { name: "sasl.mechanism.controller.protocol", default: "PLAIN", kind: Kind::Text, help: "The SASL mechanism nodes log in to a SASL controller listener with, as sasl.jaas.config's username and password: PLAIN in this build. The controller accepts that login only for its own username and super.users." },
    Key { name: "inter.broker.listener.name", default: "PLAINTEXT", kind: Kind::Names { one: true }, help: "The listener brokers use to reach each other: any protocol (SSL and SASL_SSL check the other brokers against ssl.truststore.location and present ssl.keystore.location; SASL logs in as sasl.jaas.config's username)." },
    Key { name: "broker.heartbeat.interval.ms", default: "2000", kind: int(10, 3_600_000), help: "How often a broker heartbeats to the active controller." },
    Key { name: "broker.session.timeout.ms", default: "9000", kind: int(100, 3_600_000), help: "A broker without a heartbeat this long is fenced: it leaves Metadata and its partitions get new leaders." },
    Key { name: "offsets.topic.replication.factor", default: "3", kind: int(1, 32767), help: "Replicas of each __consumer_offsets partition in a cluster; the topic is created (at the first FindCoordinator) only once this many brokers are live, and until then FindCoordinator answers COORDINATOR_NOT_AVAILABLE. A single node uses 1." },
    Key { name: "transaction.state.log.replication.factor", default: "3", kind: int(1, 32767), help: "Replicas of each __transaction_state partition in a cluster; created (at the first FindCoordinator for a transactional id) only once this many brokers are live. A single node uses 1." },
    Key { name: "transaction.state.log.min.isr", default: "2", kind: int(1, 32767), help: "min.insync.replicas of __transaction_state as a cluster creates it (at most its replication factor): a coordinator's transition is refused (COORDINATOR_NOT_AVAILABLE, retried) while fewer replicas are in sync." },
    Key { name: "transaction.max.timeout.ms", default: "900000", kind: int(1, i32::MAX as i64), help: "The longest transaction.timeout.ms a transactional producer may ask for (InitProducerId answers INVALID_TRANSACTION_TIMEOUT past it)." },
    Key { name: "transactional.id.expiration.ms", default: "604800000", kind: int(1, i32::MAX as i64), help: "A transactional id with no transaction open and no request for this long is forgotten (its record in __transaction_state is deleted)." },
    Key { name: "transaction.remove.expired.transaction.cleanup.interval.ms", default: "3600000", kind: int(1, i32::MAX as i64), help: "How often the transaction coordinator looks for expired transactional ids." },
    Key { name: "transaction.partition.verification.enable", default: "true", kind: Kind::Boolean, help: "KIP-890 part 1: a partition leader asks the transaction coordinator before it takes the first transactional batch of a producer's transaction, and refuses one whose partition is not in the ongoing transaction (INVALID_TXN_STATE), so no late batch opens a transaction that never ends." },
    Key { name: "transaction.abort.timed.out.transaction.cleanup.interval.ms", default: "10000", kind: int(1, 3_600_000), help: "How often the transaction coordinator aborts transactions open longer than their timeout." },
    Key { name: "replica.lag.time.max.ms", default: "30000", kind: int(100, 3_600_000), help: "A follower that has not caught up with its leader's log end for this long leaves the in-sync replicas." },
    Key { name: "auto.leader.rebalance.enable", default: "true", kind: Kind::Boolean, help: "The active controller moves leadership back to each partition's preferred (first) replica when it is a live in-sync replica." },
    Key { name: "leader.imbalance.check.interval.seconds", default: "300", kind: int(1, 86_400), help: "How often the active controller looks for partitions to give back to their preferred replica." },
    Key { name: "cpu.pinning", default: "true", kind: Kind::Boolean, help: "Pin each shard to its CPU (false lets several brokers share a small machine)." },
    Key { name: "broker.rack", default: "", kind: Kind::Text, help: "This broker's rack, reported in Metadata and DescribeCluster (empty: none)." },
    Key { name: "admin.listener", default: "127.0.0.1:9644", kind: Kind::Address, help: "HTTP listener for /metrics, /health and the web console (keep it on loopback or behind a TLS proxy: it is plain HTTP)." },
    Key { name: "console.enabled", default: "true", kind: Kind::Boolean, help: "Serve the web console at / on the admin listener (false: only /metrics and /health)." },
    Key { name: "console.allowed.hosts", default: "", kind: Kind::Text, help: "Extra Host header values the console answers (host:port, comma-separated), e.g. a proxy's name; loopback names and this node's addresses are always allowed (DNS rebinding defence)." },
    Key { name: "console.session.idle.ms", default: "1800000", kind: int(10_000, 86_400_000), help: "A console login ends after this long without a request." },
    Key { name: "console.session.max.ms", default: "28800000", kind: int(10_000, 604_800_000), help: "A console login ends this long after it began." },
    Key { name: "console.chart.interval.ms", default: "5000", kind: int(200, 600_000), help: "How often the console's live charts sample this node's counters and histograms (an hour of samples is kept)." },
    Key { name: "num.cores", default: "all", kind: Kind::Cores, help: "Shards to run, one pinned per allowed CPU (all = every CPU this process may use)." },
    Key { name: "log.level", default: "info", kind: Kind::Level, help: "Log level (RUST_LOG, when set, takes a full filter and wins)." },
    Key { name: "auto.create.topics.enable", default: "true", kind: Kind::Boolean, help: "Create unknown topics on Metadata/Produce." },
    Key { name: "num.partitions", default: "1", kind: int(1, 100_000), help: "Partitions of auto-created topics." },
    Key { name: "default.replication.factor", default: "1", kind: int(1, 32_767), help: "Replicas of auto-created topics and of CreateTopics with replication factor -1." },
    Key { name: "socket.request.max.bytes", default: "104857600", kind: int(1024, i32::MAX as i64), help: "Largest request frame accepted." },
    Key { name: "queued.max.request.bytes", default: "536870912", kind: int(1 << 20, i64::MAX), help: "Bytes of requests read and not yet answered, for the whole broker; each shard gets an equal share, and a frame larger than a share is read alone. (Kafka's -1, no bound, is not offered.)" },
    Key { name: "connections.max.idle.ms", default: "600000", kind: int(-1, i64::MAX), help: "Close a connection that sent no request for this long (-1: never)." },
    Key { name: "socket.request.frame.timeout.ms", default: "30000", kind: int(1, i64::MAX), help: "A request frame must arrive whole within this long of its first byte, or the connection is closed (strata)." },
    Key { name: "max.connections", default: "2147483647", kind: int(1, i32::MAX as i64), help: "Client connections the broker serves at once; past it new connections wait to be accepted." },
    Key { name: "max.connections.per.ip", default: "2147483647", kind: int(1, i32::MAX as i64), help: "Connections one address may have open; past it a new one is closed at once." },
    Key { name: "log.cache.bytes", default: "268435456", kind: int(0, i64::MAX), help: "Per-shard cache of recent batches (strata)." },
    Key { name: "log.write.buffer.bytes", default: "134217728", kind: int(1048576, i64::MAX), help: "Per-shard budget of write-behind buffers every partition's appends draw from; appends wait when it is spent (strata)." },
    Key { name: "log.retention.check.interval.ms", default: "300000", kind: int(1, i64::MAX), help: "How often retention runs." },
    Key { name: "log.retention.ms", default: "604800000", kind: int(-1, i64::MAX), help: "Default retention.ms of topics (-1: keep forever)." },
    Key { name: "log.retention.bytes", default: "-1", kind: int(-1, i64::MAX), help: "Default retention.bytes of topics (-1: no limit)." },
    Key { name: "log.segment.bytes", default: "1073741824", kind: int(14, u32::MAX as i64), help: "Default segment.bytes of topics." },
    Key { name: "log.roll.ms", default: "604800000", kind: int(1, i64::MAX), help: "Default segment.ms of topics." },
    Key { name: "message.max.bytes", default: "1048588", kind: int(0, 64 << 20), help: "Default max.message.bytes of topics." },
    Key { name: "log.index.interval.bytes", default: "4096", kind: int(0, i32::MAX as i64), help: "Default index.interval.bytes of topics." },
    Key { name: "log.flush.policy", default: "always", kind: Kind::FlushPolicy, help: "Default flush.policy of topics: always (fsync before acks=all is answered), never, interval:<ms> (strata)." },
    Key { name: "log.cleanup.policy", default: "delete", kind: Kind::CleanupPolicy, help: "Default cleanup.policy of topics: delete (retention), compact (keep the last record per key) or compact,delete." },
    Key { name: "log.cleaner.delete.retention.ms", default: "86400000", kind: int(0, i64::MAX), help: "Default delete.retention.ms of topics: how long compaction keeps a tombstone." },
    Key { name: "group.initial.rebalance.delay.ms", default: "3000", kind: int(0, 300_000), help: "Wait for more members before the first rebalance of an empty group." },
    Key { name: "group.consumer.session.timeout.ms", default: "45000", kind: int(1000, 1_800_000), help: "KIP-848 consumer groups: a member without a heartbeat this long is removed." },
    Key { name: "group.consumer.heartbeat.interval.ms", default: "2000", kind: int(100, 600_000), help: "KIP-848 consumer groups: how often members are told to heartbeat (Kafka: 5000; a member still reconciling is asked back within 250 ms)." },
    Key { name: "group.consumer.max.size", default: "1000", kind: int(1, 100_000), help: "KIP-848 consumer groups: most members in a group." },
    Key { name: "group.consumer.assignors", default: "uniform,range", kind: Kind::Text, help: "KIP-848 consumer groups: the server assignors offered (uniform, range), the first the default." },
    Key { name: "group.consumer.migration.policy", default: "bidirectional", kind: Kind::Text, help: "Conversion between classic and consumer groups: bidirectional, upgrade, downgrade or disabled." },
    Key { name: "group.share.partition.idle.ms", default: "300000", kind: int(1000, i64::MAX), help: "Share groups (strata): a share partition's leader drops it from memory once nothing is acquired, every change is written to its share coordinator and no request used it for this long; the next fetch loads it from the coordinator again." },
    Key { name: "errors.deadletterqueue.topic.name.prefix", default: "dlq.", kind: Kind::Text, help: "Share groups (KIP-1191): a group's dead-letter topic must start with this (empty: any name not starting with __)." },
    Key { name: "errors.deadletterqueue.auto.create.topics.enable", default: "false", kind: Kind::Boolean, help: "Share groups (KIP-1191): create a group's missing dead-letter topic (with errors.deadletterqueue.group.enable=true) at its first dead letter; otherwise the topic must exist and opt in." },
    Key { name: "offsets.retention.minutes", default: "10080", kind: int(1, i32::MAX as i64), help: "Committed offsets of groups without members expire this long after their last commit." },
    Key { name: "offsets.retention.ms", default: "", kind: int(1, i64::MAX), help: "The same in milliseconds; overrides offsets.retention.minutes when set (strata)." },
    Key { name: "offsets.compact.bytes", default: "67108864", kind: int(4096, i64::MAX), help: "Compact an __consumer_offsets partition above this size (strata)." },
];

/// Topic configs whose broker-wide default a broker key sets (Kafka's `log.*` names).
pub const TOPIC_DEFAULTS: &[(&str, &str)] = &[
    ("log.retention.ms", "retention.ms"),
    ("log.retention.bytes", "retention.bytes"),
    ("log.segment.bytes", "segment.bytes"),
    ("log.roll.ms", "segment.ms"),
    ("message.max.bytes", "max.message.bytes"),
    ("log.index.interval.bytes", "index.interval.bytes"),
    ("log.flush.policy", "flush.policy"),
    ("log.cleanup.policy", "cleanup.policy"),
    ("log.cleaner.delete.retention.ms", "delete.retention.ms"),
];

pub fn find(name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|key| key.name == name)
}

/// `STRATA_` + the key upper-cased with dots as underscores: `log.dirs` → `STRATA_LOG_DIRS`.
pub fn env_name(name: &str) -> String {
    format!("STRATA_{}", name.to_ascii_uppercase().replace('.', "_"))
}

/// Whether a key's value is a secret, never logged or shown (`sasl.jaas.config` holds PLAIN's
/// passwords).
pub fn is_secret(name: &str) -> bool {
    name.ends_with("jaas.config") || name.contains("password")
}

/// Checks `value` for `key`; the error names the valid range.
pub fn check(key: &Key, value: &str) -> Result<(), String> {
    let value = value.trim();
    match key.kind {
        Kind::Integer { min, max } => match value.parse::<i64>() {
            Ok(number) if (min..=max).contains(&number) => Ok(()),
            Ok(number) => Err(format!("{number} is outside the valid range {min}..={max}")),
            Err(_) => Err(format!("{value:?} is not an integer (valid range {min}..={max})")),
        },
        Kind::Boolean => match value {
            "true" | "false" => Ok(()),
            _ => Err(format!("{value:?} is not a boolean (true or false)")),
        },
        Kind::Path => {
            if value.is_empty() {
                Err("empty path".into())
            } else if value.contains(',') {
                Err(format!("{value:?}: strata uses one data directory per broker"))
            } else {
                Ok(())
            }
        }
        Kind::Address => {
            let bare = strip_listener_scheme(value);
            match bare.rsplit_once(':') {
                Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => Ok(()),
                _ => Err(format!("{value:?} is not HOST:PORT (port 0..=65535)")),
            }
        }
        Kind::Listeners { empty } => match crate::config::cluster::parse_listeners(value) {
            Ok(listeners) if listeners.is_empty() && !empty => Err("no listener".into()),
            Ok(_) => Ok(()),
            Err(error) => Err(error),
        },
        Kind::Roles => crate::config::cluster::parse_roles(value).map(drop),
        Kind::Voters => crate::config::cluster::parse_voters(value).map(drop),
        Kind::Names { one } => match crate::config::cluster::parse_names(value) {
            Ok(names) if one && names.len() != 1 => Err(format!("{value:?}: one listener name")),
            Ok(_) => Ok(()),
            Err(error) => Err(error),
        },
        Kind::ProtocolMap => crate::config::cluster::parse_protocol_map(value).map(drop),
        Kind::Text => Ok(()),
        Kind::Level => match value {
            "error" | "warn" | "info" | "debug" | "trace" => Ok(()),
            _ => Err(format!("{value:?}: use error, warn, info, debug or trace")),
        },
        Kind::FlushPolicy => crate::metadata::topic_config::parse_flush_policy(value)
            .map(drop)
            .map_err(|_| format!("{value:?}: use always, never or interval:<ms>")),
        Kind::CleanupPolicy => crate::metadata::topic_config::parse_cleanup_policy(value)
            .map(drop)
            .map_err(|_| format!("{value:?}: use delete, compact or compact,delete")),
        Kind::Cores => match value {
            "all" => Ok(()),
            _ => match value.parse::<usize>() {
                Ok(cores) if cores >= 1 => Ok(()),
                _ => Err(format!("{value:?}: use all or a number of cores >= 1")),
            },
        },
    }
}

/// `PLAINTEXT://host:port` → `host:port` (strata has one plaintext listener).
pub fn strip_listener_scheme(value: &str) -> &str {
    value.strip_prefix("PLAINTEXT://").unwrap_or(value)
}
