//! The cluster keys, with Kafka's KRaft names (issue #15): `process.roles`,
//! `controller.quorum.voters`, `controller.listener.names`, named `listeners`,
//! `listener.security.protocol.map`, `inter.broker.listener.name` and `broker.rack`.
//!
//! Parsed and cross-checked here as Kafka's `KafkaConfig` does, so a config that a cluster
//! will need is settled before the controller exists. With no voters, a node is a one-node
//! cluster of itself (today's single node). What this build cannot run yet (TLS or SASL
//! listeners, several client listeners) is refused at startup by
//! `ClusterConfig::check_runnable`, naming the issue that brings it, never ignored.

use std::collections::BTreeMap;

/// A node's roles (`process.roles`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Roles {
    pub broker: bool,
    pub controller: bool,
}

/// One `id@host:port` of `controller.quorum.voters`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Voter {
    pub id: i32,
    pub host: String,
    pub port: u16,
}

/// One entry of `listeners`: `NAME://host:port`, or a bare `host:port` (named PLAINTEXT).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    pub name: String,
    pub host: String,
    pub port: u16,
}

/// Kafka's default `listener.security.protocol.map`.
pub const DEFAULT_PROTOCOL_MAP: &str =
    "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL";
/// The security protocols Kafka defines.
const PROTOCOLS: &[&str] = &["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"];

pub fn parse_roles(value: &str) -> Result<Roles, String> {
    let mut roles = Roles { broker: false, controller: false };
    for role in value.split(',').map(str::trim) {
        let seen = match role {
            "broker" => std::mem::replace(&mut roles.broker, true),
            "controller" => std::mem::replace(&mut roles.controller, true),
            _ => return Err(format!("{role:?}: use broker, controller or broker,controller")),
        };
        if seen {
            return Err(format!("{role:?} is listed twice"));
        }
    }
    Ok(roles)
}

/// `1@host:port,2@host:port`; empty for none. Ids and addresses must be unique.
pub fn parse_voters(value: &str) -> Result<Vec<Voter>, String> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(Vec::new());
    }
    let mut voters: Vec<Voter> = Vec::new();
    for entry in value.split(',').map(str::trim) {
        let (id, address) =
            entry.split_once('@').ok_or_else(|| format!("{entry:?} is not ID@HOST:PORT"))?;
        let id: i32 = id
            .parse()
            .ok()
            .filter(|id| *id >= 0)
            .ok_or_else(|| format!("{entry:?}: the id is not a node id (0..=2147483647)"))?;
        let (host, port) = host_port(address).map_err(|e| format!("{entry:?}: {e}"))?;
        if voters.iter().any(|v| v.id == id) {
            return Err(format!("voter id {id} is listed twice"));
        }
        if voters.iter().any(|v| v.host == host && v.port == port) {
            return Err(format!("{address:?} is listed for two voters"));
        }
        voters.push(Voter { id, host, port });
    }
    Ok(voters)
}

/// `listeners` / `advertised.listeners`: comma-separated `NAME://host:port` or `host:port`.
pub fn parse_listeners(value: &str) -> Result<Vec<Listener>, String> {
    let mut listeners: Vec<Listener> = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|entry| !entry.is_empty()) {
        let (name, address) = match entry.split_once("://") {
            Some((name, address)) => (name.to_string(), address),
            None => ("PLAINTEXT".to_string(), entry),
        };
        if !valid_name(&name) {
            return Err(format!("{entry:?}: {name:?} is not a listener name (A-Z, 0-9, _)"));
        }
        let (host, port) = host_port(address).map_err(|e| format!("{entry:?}: {e}"))?;
        if listeners.iter().any(|l| l.name == name) {
            return Err(format!("listener {name} is listed twice"));
        }
        listeners.push(Listener { name, host, port });
    }
    Ok(listeners)
}

/// Comma-separated listener names (`controller.listener.names`).
pub fn parse_names(value: &str) -> Result<Vec<String>, String> {
    let names: Vec<String> =
        value.split(',').map(str::trim).filter(|n| !n.is_empty()).map(String::from).collect();
    match names.iter().find(|name| !valid_name(name)) {
        Some(bad) => Err(format!("{bad:?} is not a listener name (A-Z, 0-9, _)")),
        None => Ok(names),
    }
}

/// `NAME:PROTOCOL,...` (`listener.security.protocol.map`).
pub fn parse_protocol_map(value: &str) -> Result<BTreeMap<String, String>, String> {
    let mut map = BTreeMap::new();
    for entry in value.split(',').map(str::trim).filter(|entry| !entry.is_empty()) {
        let (name, protocol) =
            entry.split_once(':').ok_or_else(|| format!("{entry:?} is not NAME:PROTOCOL"))?;
        if !valid_name(name) {
            return Err(format!("{entry:?}: {name:?} is not a listener name (A-Z, 0-9, _)"));
        }
        if !PROTOCOLS.contains(&protocol) {
            return Err(format!("{entry:?}: use PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"));
        }
        if map.insert(name.to_string(), protocol.to_string()).is_some() {
            return Err(format!("listener {name} is mapped twice"));
        }
    }
    Ok(map)
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// `host:port` (an IPv6 host in brackets).
fn host_port(value: &str) -> Result<(String, u16), String> {
    let (host, port) = value.rsplit_once(':').ok_or("not HOST:PORT")?;
    let port: u16 = port.parse().map_err(|_| "not HOST:PORT (port 0..=65535)")?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err("empty host".into());
    }
    Ok((host.to_string(), port))
}

/// The cluster keys of one node, checked against each other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    pub node_id: i32,
    pub roles: Roles,
    pub voters: Vec<Voter>,
    pub controller_listener_names: Vec<String>,
    /// Every listener (client ones and the controller's, if listed).
    pub listeners: Vec<Listener>,
    pub protocol_map: BTreeMap<String, String>,
    pub inter_broker_listener: String,
    /// `broker.rack`, `None` when empty.
    pub rack: Option<String>,
}

/// The raw values of the cluster keys.
pub struct ClusterKeys<'a> {
    pub node_id: i32,
    pub roles: &'a str,
    pub voters: &'a str,
    pub controller_listener_names: &'a str,
    pub listeners: &'a str,
    pub protocol_map: &'a str,
    pub inter_broker_listener: &'a str,
    pub rack: &'a str,
}

impl ClusterConfig {
    /// Parses and cross-checks the keys, with Kafka's rules (`KafkaConfig` validation): a
    /// controller is a voter and a broker-only node is not; there is a quorum for a node
    /// that is not a controller; the controller listener names are not client listeners;
    /// every listener has a security protocol; the inter-broker listener is a client one.
    pub fn from_keys(keys: &ClusterKeys) -> Result<Self, String> {
        let roles = parse_roles(keys.roles).map_err(|e| format!("process.roles: {e}"))?;
        let voters =
            parse_voters(keys.voters).map_err(|e| format!("controller.quorum.voters: {e}"))?;
        let controller_listener_names = parse_names(keys.controller_listener_names)
            .map_err(|e| format!("controller.listener.names: {e}"))?;
        let listeners = parse_listeners(keys.listeners).map_err(|e| format!("listeners: {e}"))?;
        let protocol_map = parse_protocol_map(keys.protocol_map)
            .map_err(|e| format!("listener.security.protocol.map: {e}"))?;
        let in_quorum = voters.iter().any(|v| v.id == keys.node_id);
        if roles.controller && !voters.is_empty() && !in_quorum {
            return Err(format!(
                "process.roles has controller, so node.id {} must be one of controller.quorum.voters",
                keys.node_id
            ));
        }
        if !roles.controller && in_quorum {
            return Err(format!(
                "node.id {} is in controller.quorum.voters, so process.roles must have controller",
                keys.node_id
            ));
        }
        if !roles.controller && voters.is_empty() {
            return Err("a node without the controller role needs controller.quorum.voters".into());
        }
        if !roles.broker && voters.is_empty() {
            // One node of itself is strata's convenience for broker,controller; a lone
            // controller with no brokers serves nothing (Kafka always wants the voters).
            return Err("a controller-only node needs controller.quorum.voters".into());
        }
        if roles.controller && controller_listener_names.is_empty() {
            return Err("controller.listener.names: a controller needs at least one name".into());
        }
        if let Some(unmapped) = listeners.iter().find(|l| !protocol_map.contains_key(&l.name)) {
            return Err(format!(
                "listeners: {} has no security protocol in listener.security.protocol.map",
                unmapped.name
            ));
        }
        let client: Vec<&Listener> =
            listeners.iter().filter(|l| !controller_listener_names.contains(&l.name)).collect();
        if roles.broker && client.is_empty() {
            return Err(
                "listeners: a broker needs a listener that is not a controller listener".into()
            );
        }
        let inter_broker_listener = keys.inter_broker_listener.trim().to_string();
        if roles.broker && !client.iter().any(|l| l.name == inter_broker_listener) {
            return Err(format!(
                "inter.broker.listener.name {inter_broker_listener:?} is not a (non-controller) listener"
            ));
        }
        let rack = Some(keys.rack.trim().to_string()).filter(|rack| !rack.is_empty());
        Ok(ClusterConfig {
            node_id: keys.node_id,
            roles,
            voters,
            controller_listener_names,
            listeners,
            protocol_map,
            inter_broker_listener,
            rack,
        })
    }

    /// The client (Kafka) listeners: every listener that is not a controller listener.
    pub fn client_listeners(&self) -> impl Iterator<Item = &Listener> {
        self.listeners.iter().filter(|l| !self.controller_listener_names.contains(&l.name))
    }

    /// Where this node's controller listens: its first controller listener in `listeners`,
    /// else, for a voter, its own address in `controller.quorum.voters` (so a three-line
    /// config is enough). A broker-only node's controller thread is a Raft learner that the
    /// leader pushes the metadata log to, so it needs a controller listener in `listeners`
    /// (strata's deviation: Kafka's brokers pull and list none).
    pub fn controller_address(&self) -> Option<(String, u16)> {
        let first = self.controller_listener_names.first()?;
        if let Some(listener) = self.listeners.iter().find(|l| &l.name == first) {
            return Some((listener.host.clone(), listener.port));
        }
        let me = self.voters.iter().find(|v| v.id == self.node_id)?;
        Some((me.host.clone(), me.port))
    }

    /// Whether this node votes in the controller quorum (a controller with voters).
    pub fn is_voter(&self) -> bool {
        self.roles.controller && self.voters.iter().any(|v| v.id == self.node_id)
    }

    /// What this build can run: a voter (`broker,controller` or `controller`), or a
    /// broker-only node with a controller listener to be pushed the metadata log on. A single
    /// node serves any number of client listeners of every protocol; so does a cluster's
    /// broker, but its inter-broker listener (the endpoint other brokers replicate from and
    /// send transaction markers to) must be PLAINTEXT: brokers reach each other without TLS
    /// or SASL in this build. Anything else is refused with the issue that builds it.
    pub fn check_runnable(&self) -> Result<(), String> {
        if !self.roles.controller && self.controller_address().is_none() {
            let name = self.controller_listener_names.first().map_or("CONTROLLER", String::as_str);
            return Err(format!(
                "listeners: a broker-only node needs a {name}://HOST:PORT listener: its controller \
                 thread is a Raft learner the quorum's leader sends the metadata log to (Kafka's \
                 brokers fetch it instead and list none)"
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys<'a>(
        node_id: i32,
        roles: &'a str,
        voters: &'a str,
        listeners: &'a str,
    ) -> ClusterKeys<'a> {
        ClusterKeys {
            node_id,
            roles,
            voters,
            controller_listener_names: "CONTROLLER",
            listeners,
            protocol_map: DEFAULT_PROTOCOL_MAP,
            inter_broker_listener: "PLAINTEXT",
            rack: "",
        }
    }

    #[test]
    fn todays_single_node_config_is_a_runnable_one_node_cluster() {
        let config = ClusterConfig::from_keys(&keys(0, "broker,controller", "", "0.0.0.0:9092"))
            .expect("valid");
        assert_eq!(config.roles, Roles { broker: true, controller: true });
        let client: Vec<&Listener> = config.client_listeners().collect();
        assert_eq!(
            client,
            [&Listener { name: "PLAINTEXT".into(), host: "0.0.0.0".into(), port: 9092 }]
        );
        assert_eq!(config.rack, None);
        config.check_runnable().expect("runnable");
    }

    #[test]
    fn a_three_line_cluster_config_parses_and_the_controller_listens_on_its_voter_address() {
        let voters = "1@127.0.0.1:19093,2@127.0.0.1:29093,3@127.0.0.1:39093";
        let config = ClusterConfig::from_keys(&keys(
            2,
            "broker,controller",
            voters,
            "PLAINTEXT://127.0.0.1:29092",
        ))
        .expect("valid");
        assert_eq!(config.voters.len(), 3);
        assert_eq!(config.controller_address(), Some(("127.0.0.1".into(), 29093)));
        // A CONTROLLER entry in listeners wins over the voter address.
        let config = ClusterConfig::from_keys(&keys(
            2,
            "broker,controller",
            voters,
            "PLAINTEXT://127.0.0.1:29092,CONTROLLER://0.0.0.0:29093",
        ))
        .expect("valid");
        assert_eq!(config.controller_address(), Some(("0.0.0.0".into(), 29093)));
        assert_eq!(config.client_listeners().count(), 1);
        config.check_runnable().expect("a voter running broker,controller is runnable");
    }

    #[test]
    fn kafkas_cross_checks_refuse_inconsistent_roles_and_listeners() {
        let voters = "1@h:1,2@h:2,3@h:3";
        for (node, roles, voters, listeners, expected) in [
            (4, "broker,controller", voters, "h:9092", "must be one of controller.quorum.voters"),
            (1, "broker", voters, "h:9092", "so process.roles must have controller"),
            (4, "broker", "", "h:9092", "needs controller.quorum.voters"),
            (0, "controller", "", "h:9092", "a controller-only node needs"),
            (1, "broker,controller", voters, "CONTROLLER://h:1", "a broker needs a listener"),
            (1, "broker,controller", voters, "INTERNAL://h:9", "has no security protocol"),
            (1, "kafka", voters, "h:9092", "use broker, controller"),
            (1, "broker,broker", voters, "h:9092", "listed twice"),
        ] {
            let error = ClusterConfig::from_keys(&keys(node, roles, voters, listeners))
                .expect_err(expected);
            assert!(error.contains(expected), "{roles} {voters} {listeners}: {error}");
        }
        let mut bad = keys(0, "broker,controller", "", "h:9092");
        bad.inter_broker_listener = "REPLICATION";
        let error = ClusterConfig::from_keys(&bad).expect_err("unknown inter-broker listener");
        assert!(error.contains("inter.broker.listener.name"), "{error}");
    }

    #[test]
    fn malformed_values_are_refused_naming_what_is_wrong() {
        for (value, expected) in [
            ("1@h", "not HOST:PORT"),
            ("x@h:1", "not a node id"),
            ("-1@h:1", "not a node id"),
            ("1@h:1,1@g:2", "voter id 1 is listed twice"),
            ("1@h:1,2@h:1", "listed for two voters"),
            ("h:1", "not ID@HOST:PORT"),
        ] {
            let error = parse_voters(value).expect_err(value);
            assert!(error.contains(expected), "{value}: {error}");
        }
        assert!(parse_listeners("plaintext://h:1")
            .expect_err("lower case")
            .contains("not a listener name"));
        assert!(parse_listeners("A://h:1,A://h:2").expect_err("twice").contains("listed twice"));
        assert!(parse_protocol_map("A:TLS").expect_err("protocol").contains("use PLAINTEXT"));
        assert_eq!(parse_voters(" ").expect("empty"), Vec::new());
        assert_eq!(
            parse_listeners("[::1]:9092").expect("v6"),
            [Listener { name: "PLAINTEXT".into(), host: "::1".into(), port: 9092 }]
        );
    }

    #[test]
    fn what_this_build_cannot_run_is_refused_with_the_issue_that_builds_it() {
        // A single node: listeners of every protocol, as many as wanted.
        let mut tls = keys(0, "broker,controller", "", "SSL://h:9093");
        tls.inter_broker_listener = "SSL";
        ClusterConfig::from_keys(&tls).expect("valid").check_runnable().expect("single-node SSL");
        let two =
            ClusterConfig::from_keys(&keys(0, "broker,controller", "", "h:9092,SSL://h:9093"))
                .expect("valid");
        two.check_runnable().expect("two single-node listeners");
        let sasl = keys(0, "broker,controller", "", "h:9092,SASL_SSL://h:9094");
        ClusterConfig::from_keys(&sasl).expect("valid").check_runnable().expect("single-node SASL");
        // A cluster: listeners of every protocol, the inter-broker one too (issue #18).
        let voters = "0@h:9093";
        let mut cluster = keys(0, "broker,controller", voters, "h:9092,SASL_SSL://h:9094");
        let two = ClusterConfig::from_keys(&cluster).expect("valid");
        two.check_runnable().expect("a cluster's SASL_SSL client listener");
        cluster.listeners = "SSL://h:9094";
        cluster.inter_broker_listener = "SSL";
        ClusterConfig::from_keys(&cluster).expect("valid").check_runnable().expect("SSL between");
    }

    #[test]
    fn broker_only_and_controller_only_nodes_are_runnable_the_broker_with_a_controller_listener() {
        let voters = "1@h:1,2@h:2,3@h:3";
        let controller =
            ClusterConfig::from_keys(&keys(1, "controller", voters, "CONTROLLER://h:1"))
                .expect("valid");
        assert!(controller.is_voter());
        controller.check_runnable().expect("a controller-only voter");
        let bare = ClusterConfig::from_keys(&keys(4, "broker", voters, "h:9092")).expect("valid");
        assert!(!bare.is_voter());
        let error = bare.check_runnable().expect_err("no controller listener");
        assert!(error.contains("CONTROLLER://HOST:PORT"), "{error}");
        let broker =
            ClusterConfig::from_keys(&keys(4, "broker", voters, "h:9092,CONTROLLER://h:4"))
                .expect("valid");
        assert_eq!(broker.controller_address(), Some(("h".into(), 4)));
        broker.check_runnable().expect("a broker-only learner");
    }
}
