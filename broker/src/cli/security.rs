//! How every CLI command reaches a secured cluster: librdkafka's property names, as kcat's and
//! rpk's `-X` take them, from a profile file (`--client-config FILE`, or the
//! `STRATA_CLIENT_CONFIG` environment variable; Java-properties `key=value` lines) and then
//! `-X key=value` flags, which win:
//! - `security.protocol`: `plaintext` (default), `ssl`, `sasl_plaintext`, `sasl_ssl`;
//! - `sasl.mechanism` (or `sasl.mechanisms`): `PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`;
//!   `sasl.username`, `sasl.password`;
//! - `ssl.ca.location` (PEM CAs the brokers' certificates are checked against),
//!   `ssl.certificate.location` and `ssl.key.location` (a client certificate, for mTLS).
//!
//! Other librdkafka keys (`client.id`, ...) are accepted and ignored with a warning, so one
//! profile serves kcat and strata alike. Set once per process, before any connection.

use crate::sasl::scram::{ScramClient, ScramMechanism};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// A SASL login.
#[derive(Clone)]
pub struct Login {
    pub mechanism: Mechanism,
    pub username: String,
    pub password: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mechanism {
    Plain,
    Scram(ScramMechanism),
}

/// What every connection of this process does after TCP connects.
#[derive(Clone, Default)]
pub struct ClientSecurity {
    pub tls: Option<Arc<rustls::ClientConfig>>,
    pub login: Option<Login>,
}

static SECURITY: OnceLock<ClientSecurity> = OnceLock::new();

/// This process's settings (plaintext, no login, until `configure`).
pub fn current() -> ClientSecurity {
    SECURITY.get().cloned().unwrap_or_default()
}

/// Reads the profile file (if any) and the `-X` pairs, and sets this process's settings.
pub fn configure(pairs: &[String], profile: Option<&Path>) -> Result<(), String> {
    let mut settings: BTreeMap<String, String> = BTreeMap::new();
    if let Some(profile) = profile {
        let text = std::fs::read_to_string(profile)
            .map_err(|e| format!("client config {}: {e}", profile.display()))?;
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
                continue;
            }
            let (key, value) = line.split_once('=').ok_or_else(|| {
                format!("client config {} line {}: not key=value", profile.display(), number + 1)
            })?;
            settings.insert(key.trim().to_string(), value.trim().to_string());
        }
    }
    for pair in pairs {
        let (key, value) =
            pair.split_once('=').ok_or_else(|| format!("-X {pair:?}: give key=value"))?;
        settings.insert(key.trim().to_string(), value.to_string());
    }
    let security = from_settings(&settings)?;
    let _ = SECURITY.set(security);
    Ok(())
}

const KNOWN: &[&str] = &[
    "security.protocol",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
];

fn from_settings(settings: &BTreeMap<String, String>) -> Result<ClientSecurity, String> {
    for key in settings.keys().filter(|key| !KNOWN.contains(&key.as_str())) {
        eprintln!("warning: client setting {key} is not used by strata's CLI");
    }
    let get = |key: &str| settings.get(key).map(String::as_str).filter(|v| !v.is_empty());
    let protocol = get("security.protocol").unwrap_or("plaintext").to_ascii_lowercase();
    let (tls, sasl) = match protocol.as_str() {
        "plaintext" => (false, false),
        "ssl" => (true, false),
        "sasl_plaintext" => (false, true),
        "sasl_ssl" => (true, true),
        other => {
            return Err(format!(
                "security.protocol {other:?}: use plaintext, ssl, sasl_plaintext or sasl_ssl"
            ))
        }
    };
    let tls = if tls { Some(tls_config(&get)?) } else { None };
    let login = if sasl {
        let mechanism = get("sasl.mechanism").or(get("sasl.mechanisms")).unwrap_or("PLAIN");
        let mechanism = match mechanism.to_ascii_uppercase().as_str() {
            "PLAIN" => Mechanism::Plain,
            name => Mechanism::Scram(ScramMechanism::from_name(name).ok_or_else(|| {
                format!("sasl.mechanism {name:?}: use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
            })?),
        };
        Some(Login {
            mechanism,
            username: get("sasl.username").ok_or("sasl.username is not set")?.to_string(),
            password: settings.get("sasl.password").cloned().ok_or("sasl.password is not set")?,
        })
    } else {
        None
    };
    Ok(ClientSecurity { tls, login })
}

fn tls_config<'a>(
    get: &impl Fn(&str) -> Option<&'a str>,
) -> Result<Arc<rustls::ClientConfig>, String> {
    let ca = get("ssl.ca.location").ok_or("ssl.ca.location is not set (the brokers' CA, PEM)")?;
    let mut roots = rustls::RootCertStore::empty();
    for certificate in
        CertificateDer::pem_file_iter(ca).map_err(|e| format!("ssl.ca.location {ca}: {e}"))?
    {
        let certificate = certificate.map_err(|e| format!("ssl.ca.location {ca}: {e}"))?;
        roots.add(certificate).map_err(|e| format!("ssl.ca.location {ca}: {e}"))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS protocol versions: {e}"))?
        .with_root_certificates(roots);
    let config = match (get("ssl.certificate.location"), get("ssl.key.location")) {
        (Some(certificate), Some(key)) => {
            let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(certificate)
                .and_then(|chain| chain.collect::<Result<_, _>>())
                .map_err(|e| format!("ssl.certificate.location {certificate}: {e}"))?;
            let key = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| format!("ssl.key.location {key}: {e}"))?;
            builder.with_client_auth_cert(chain, key).map_err(|e| e.to_string())?
        }
        (None, None) => builder.with_no_client_auth(),
        _ => return Err("give both ssl.certificate.location and ssl.key.location".into()),
    };
    Ok(Arc::new(config))
}

/// Logs in over a connected client (SaslHandshake v1, then SaslAuthenticate v2 rounds).
pub fn authenticate(client: &mut super::Client, login: &Login) -> Result<(), String> {
    let name = match login.mechanism {
        Mechanism::Plain => "PLAIN",
        Mechanism::Scram(mechanism) => mechanism.name(),
    };
    let mut handshake = SaslHandshakeRequest::default();
    handshake.mechanism = StrBytes::from_static_str(name);
    match client.call(ApiKey::SaslHandshake, 1, RequestKind::SaslHandshake(handshake))? {
        ResponseKind::SaslHandshake(response) => super::check(
            response.error_code,
            None,
            &format!("SASL {name} at {} (it offers {:?})", client.address(), response.mechanisms),
        )?,
        _ => return Err("unexpected response".into()),
    }
    match login.mechanism {
        Mechanism::Plain => {
            let token = format!("\0{}\0{}", login.username, login.password);
            sasl_round(client, token.into_bytes()).map(drop)
        }
        Mechanism::Scram(mechanism) => {
            use rand::distributions::{Alphanumeric, DistString};
            let nonce = Alphanumeric.sample_string(&mut rand::thread_rng(), 24);
            let (scram, first) =
                ScramClient::start(mechanism, &login.username, &login.password, &nonce);
            let server_first = sasl_round(client, first)?;
            let (client_final, signature) = scram.finish(&server_first)?;
            let server_final = sasl_round(client, client_final)?;
            ScramClient::verify(&signature, &server_final)
        }
    }
}

/// One SaslAuthenticate exchange: the server's bytes, or its error with the login's name.
fn sasl_round(client: &mut super::Client, bytes: Vec<u8>) -> Result<Vec<u8>, String> {
    let mut request = SaslAuthenticateRequest::default();
    request.auth_bytes = bytes.into();
    match client.call(ApiKey::SaslAuthenticate, 2, RequestKind::SaslAuthenticate(request))? {
        ResponseKind::SaslAuthenticate(response) => {
            let what = format!("logging in at {}", client.address());
            super::check(response.error_code, response.error_message.as_ref(), &what)?;
            Ok(response.auth_bytes.to_vec())
        }
        _ => Err("unexpected response".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn librdkafka_names_choose_the_protocol_and_the_login() {
        let plain = from_settings(&settings(&[])).unwrap();
        assert!(plain.tls.is_none() && plain.login.is_none());
        let sasl = from_settings(&settings(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "scram-sha-512"),
            ("sasl.username", "alice"),
            ("sasl.password", "s3cret"),
        ]))
        .unwrap();
        let login = sasl.login.unwrap();
        assert_eq!(login.mechanism, Mechanism::Scram(ScramMechanism::Sha512));
        assert_eq!((login.username.as_str(), login.password.as_str()), ("alice", "s3cret"));
        for bad in [
            settings(&[("security.protocol", "kerberos")]),
            settings(&[("security.protocol", "sasl_plaintext"), ("sasl.username", "a")]),
            settings(&[("security.protocol", "ssl")]),
            settings(&[
                ("security.protocol", "sasl_plaintext"),
                ("sasl.mechanism", "GSSAPI"),
                ("sasl.username", "a"),
                ("sasl.password", "b"),
            ]),
        ] {
            assert!(from_settings(&bad).is_err(), "{bad:?}");
        }
    }
}
