//! TLS on the SSL listeners (issue #18), with rustls (ring provider) over the shard's
//! TcpStream through futures-rustls.
//!
//! Kafka's KIP-651 PEM keys: `ssl.keystore.type=PEM`, `ssl.keystore.location` (one file with
//! the private key and the certificate chain), `ssl.truststore.location` (the CA certificates
//! client certificates are checked against) and `ssl.client.auth` (`none`, `requested`,
//! `required`). A client's principal is the full distinguished name of its certificate's
//! subject in RFC 2253 form (Kafka's `X500Principal.getName()`, `CN=client,O=acme`), as
//! `ssl.principal.mapping.rules=DEFAULT` leaves it.
//! The server config is built once at startup and shared by every shard (read once per
//! handshake, never on the request path); `TlsServer::reload` swaps it (SIGHUP) without
//! touching open connections.
//! Runs on: any thread (the config is `Send + Sync`).

use rustls::pki_types::CertificateDer;
use rustls::ServerConfig;
use std::sync::{Arc, RwLock};

pub use crate::config::security::{ClientAuth, TlsSettings};
pub use crate::config::tls::server_config;

/// The server config every SSL listener hands its handshakes, reloadable.
pub struct TlsServer {
    settings: TlsSettings,
    config: RwLock<Arc<ServerConfig>>,
}

impl TlsServer {
    pub fn new(settings: TlsSettings) -> Result<Self, String> {
        let config = server_config(&settings)?;
        Ok(TlsServer { settings, config: RwLock::new(config) })
    }

    /// The config for the next handshake.
    pub fn current(&self) -> Arc<ServerConfig> {
        match self.config.read() {
            Ok(config) => config.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Reads the key, chain and CAs again (SIGHUP); on an error the old ones stay.
    pub fn reload(&self) -> Result<(), String> {
        let config = server_config(&self.settings)?;
        match self.config.write() {
            Ok(mut current) => *current = config,
            Err(poisoned) => *poisoned.into_inner() = config,
        }
        Ok(())
    }
}

/// The server config SIGHUP reloads (set once at startup).
static RELOADABLE: std::sync::OnceLock<Arc<TlsServer>> = std::sync::OnceLock::new();

pub fn install_for_reload(server: Arc<TlsServer>) {
    let _ = RELOADABLE.set(server);
}

/// SIGHUP: reads the certificates again; new handshakes use them, open connections keep
/// theirs. A failure is logged and the old ones stay.
pub fn reload_installed() {
    let Some(server) = RELOADABLE.get() else {
        tracing::info!("SIGHUP: no SSL listener, nothing to reload");
        return;
    };
    match server.reload() {
        Ok(()) => tracing::info!("SIGHUP: SSL certificates reloaded"),
        Err(error) => {
            tracing::error!(%error, "SIGHUP: reloading the SSL certificates failed; the old ones stay")
        }
    }
}

/// The distinguished name of a certificate's subject as Kafka gives it
/// (`X500Principal.getName()`, RFC 2253): the relative names last first, joined by commas
/// without spaces, with RFC 2253's escapes. `None` for a certificate that does not parse.
pub fn subject_name(certificate: &CertificateDer<'_>) -> Option<String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(certificate.as_ref()).ok()?;
    let mut parts = Vec::new();
    for rdn in parsed.subject().iter().collect::<Vec<_>>().into_iter().rev() {
        let mut attributes = Vec::new();
        for attribute in rdn.iter() {
            let oid = attribute.attr_type();
            let key = x509_parser::objects::oid2abbrev(oid, x509_parser::objects::oid_registry())
                .map(str::to_string)
                .unwrap_or_else(|_| oid.to_id_string());
            let value = attribute.as_str().map(escape).unwrap_or_else(|_| {
                let der = attribute.attr_value().as_bytes();
                format!("#{}", der.iter().map(|b| format!("{b:02x}")).collect::<String>())
            });
            attributes.push(format!("{key}={value}"));
        }
        parts.push(attributes.join("+"));
    }
    Some(parts.join(","))
}

/// RFC 2253 escaping of an attribute value.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (index, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (index == 0 && (c == ' ' || c == '#'))
            || (index == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_escaped_as_rfc_2253_says() {
        assert_eq!(escape("acme, inc"), "acme\\, inc");
        assert_eq!(escape("#1"), "\\#1");
        assert_eq!(escape(" a "), "\\ a\\ ");
        assert_eq!(escape("plain"), "plain");
    }

    #[test]
    fn a_subject_is_kafkas_rfc_2253_name_last_attribute_first() {
        let mut params = rcgen::CertificateParams::default();
        // In this order in the certificate (ASN.1), so RFC 2253 names them the other way round.
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(rcgen::DnType::CountryName, "SE");
        params.distinguished_name.push(rcgen::DnType::OrganizationName, "acme, inc");
        params.distinguished_name.push(rcgen::DnType::CommonName, "app-1");
        let key = rcgen::KeyPair::generate().expect("key");
        let certificate = params.self_signed(&key).expect("certificate");
        let name = subject_name(certificate.der()).expect("parses");
        assert_eq!(name, "CN=app-1,O=acme\\, inc,C=SE");
        assert_eq!(subject_name(&CertificateDer::from(vec![1, 2, 3])), None);
    }
}
