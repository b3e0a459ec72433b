//! The security settings of the listeners (issue #18): TLS (`ssl.*`, Kafka's KIP-651 PEM keys)
//! and SASL (`sasl.*`). Read by `BrokerConfig`; used by `net::tls` and the SASL handlers.

use std::collections::BTreeMap;
use std::path::PathBuf;

/// Kafka's `ssl.client.auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// No client certificate is asked for.
    None,
    /// Asked for; a client without one is still served (as `User:ANONYMOUS`).
    Requested,
    /// A client without a valid certificate fails the handshake.
    Required,
}

impl ClientAuth {
    pub fn parse(value: &str) -> Result<Self, String> {
        match value.trim() {
            "none" | "" => Ok(ClientAuth::None),
            "requested" => Ok(ClientAuth::Requested),
            "required" => Ok(ClientAuth::Required),
            other => Err(format!("ssl.client.auth = {other:?}: none, requested or required")),
        }
    }
}

/// The `ssl.*` settings of the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// `ssl.keystore.location`: the private key and its certificate chain, PEM.
    pub keystore: PathBuf,
    /// `ssl.truststore.location`: CA certificates for client certificates, PEM.
    pub truststore: Option<PathBuf>,
    pub client_auth: ClientAuth,
}

/// The SASL mechanisms this build offers.
pub const MECHANISMS: &[&str] = &["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];

/// The broker's SASL settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslSettings {
    /// `sasl.enabled.mechanisms`, each one of `MECHANISMS`.
    pub mechanisms: Vec<String>,
    /// PLAIN's users and passwords (`sasl.jaas.config`'s `user_<name>="<password>"`).
    pub plain_users: BTreeMap<String, String>,
    /// `sasl.server.max.receive.size`: the largest frame before authentication.
    pub max_receive_bytes: usize,
    /// `connection.failed.authentication.delay.ms`.
    pub failure_delay_ms: u64,
    /// `connections.max.reauth.ms`: a session's lifetime (0: it never expires).
    pub reauth_ms: u64,
}

/// A secret (a password) that never shows in logs or `Debug` output.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[hidden]")
    }
}

/// The SASL mechanisms a node logs in to other brokers and controllers with
/// (`sasl.mechanism.inter.broker.protocol`, `sasl.mechanism.controller.protocol`).
pub const PEER_MECHANISMS: &[&str] = &["PLAIN"];

/// How this node reaches other brokers (the inter-broker listener) or controllers (the
/// controller listener), from that listener's security protocol: TLS (the truststore's CAs
/// check the peer, this node's keystore is its client certificate) and a SASL PLAIN login
/// (the JAAS line's own `username`/`password`, as Kafka's brokers log in).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerSecurity {
    pub tls: Option<TlsSettings>,
    pub login: Option<(String, Secret)>,
}

impl PeerSecurity {
    /// The settings for a listener of `protocol`, checked: TLS needs a keystore and a
    /// truststore, SASL a login and a mechanism this build logs in with.
    pub fn for_protocol(
        protocol: &str,
        listener: &str,
        tls: Option<&TlsSettings>,
        jaas: &str,
        mechanism_key: &str,
        mechanism: &str,
    ) -> Result<PeerSecurity, String> {
        let mut security = PeerSecurity::default();
        if protocol == "SSL" || protocol == "SASL_SSL" {
            let tls = tls.ok_or_else(|| {
                format!("the {listener} listener is {protocol}: give ssl.keystore.location")
            })?;
            if tls.truststore.is_none() {
                return Err(format!(
                    "the {listener} listener is {protocol}: nodes check each other's \
                     certificates against ssl.truststore.location (the cluster's CA); give it"
                ));
            }
            security.tls = Some(tls.clone());
        }
        if protocol.starts_with("SASL_") {
            if !PEER_MECHANISMS.contains(&mechanism.trim()) {
                return Err(format!(
                    "{mechanism_key} = {mechanism:?}: nodes log in to each other with {} in \
                     this build",
                    PEER_MECHANISMS.join(", ")
                ));
            }
            let options = jaas_options(jaas)?;
            match (options.get("username"), options.get("password")) {
                (Some(user), Some(password)) => {
                    security.login = Some((user.clone(), Secret(password.clone())))
                }
                _ => {
                    return Err(format!(
                        "the {listener} listener is {protocol}: this node logs in to the others \
                         as sasl.jaas.config's username=\"...\" password=\"...\" (give both)"
                    ))
                }
            }
        }
        Ok(security)
    }
}

/// The users of a `PlainLoginModule` JAAS configuration: its `user_<name>="<password>"`
/// options (`username`/`password`, the broker's own login, are not users).
pub fn plain_users(jaas: &str) -> Result<BTreeMap<String, String>, String> {
    Ok(jaas_options(jaas)?
        .into_iter()
        .filter_map(|(key, value)| Some((key.strip_prefix("user_")?.to_string(), value)))
        .collect())
}

/// Every `key="value"` option of a `PlainLoginModule` JAAS line.
fn jaas_options(jaas: &str) -> Result<BTreeMap<String, String>, String> {
    let jaas = jaas.trim();
    if jaas.is_empty() {
        return Ok(BTreeMap::new());
    }
    let body = jaas
        .strip_prefix("org.apache.kafka.common.security.plain.PlainLoginModule")
        .ok_or("sasl.jaas.config: strata reads org.apache.kafka.common.security.plain.PlainLoginModule")?
        .trim_start();
    let body = body.strip_prefix("required").ok_or("sasl.jaas.config: expected `required`")?;
    let body = body.trim().strip_suffix(';').ok_or("sasl.jaas.config: expected a final `;`")?;
    let mut users = BTreeMap::new();
    let mut rest = body.trim();
    while !rest.is_empty() {
        let (key, after) =
            rest.split_once('=').ok_or("sasl.jaas.config: expected key=\"value\"")?;
        let after = after.trim_start();
        let after = after.strip_prefix('"').ok_or("sasl.jaas.config: values are quoted")?;
        let (value, after) = after.split_once('"').ok_or("sasl.jaas.config: unclosed quote")?;
        users.insert(key.trim().to_string(), value.to_string());
        rest = after.trim_start();
    }
    Ok(users)
}

/// The authorizer settings: on when `authorizer.class.name` is set; `super.users` is Kafka's
/// semicolon-separated principal list, each `Type:name`.
pub fn authorizer(
    class: &str,
    super_users: &str,
    allow_if_no_acl: &str,
) -> Result<crate::authorization::Authorizer, String> {
    let super_users: Vec<String> = super_users
        .split(';')
        .map(str::trim)
        .filter(|user| !user.is_empty())
        .map(str::to_string)
        .collect();
    if let Some(bad) = super_users.iter().find(|user| {
        user.split_once(':').is_none_or(|(kind, name)| kind.is_empty() || name.is_empty())
    }) {
        return Err(format!(
            "super.users: {bad:?} is not a principal (Type:name, e.g. User:admin; several are \
             separated by ';')"
        ));
    }
    Ok(crate::authorization::Authorizer {
        enabled: !class.trim().is_empty(),
        super_users,
        allow_if_no_acl: allow_if_no_acl.trim() == "true",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jaas_users_are_read_and_the_login_is_not_a_user() {
        let jaas = r#"org.apache.kafka.common.security.plain.PlainLoginModule required
            username="admin" password="admin-secret"
            user_admin="admin-secret" user_alice="alice secret";"#;
        let users = plain_users(jaas).expect("parses");
        assert_eq!(users.len(), 2);
        assert_eq!(users["alice"], "alice secret");
        assert!(plain_users("com.example.Other required;").is_err());
        assert!(plain_users("").expect("empty").is_empty());
    }

    #[test]
    fn client_auth_takes_kafkas_values() {
        assert_eq!(ClientAuth::parse("required"), Ok(ClientAuth::Required));
        assert_eq!(ClientAuth::parse("none"), Ok(ClientAuth::None));
        assert!(ClientAuth::parse("yes").is_err());
    }
}
