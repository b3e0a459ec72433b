//! rustls configs from the `ssl.*` settings (issue #18): the server config of SSL listeners
//! (the keystore's key and chain; client certificates checked against the truststore when
//! `ssl.client.auth` asks), and the client config a node reaches the other brokers and
//! controllers with (the truststore's CAs as roots, the keystore as its client certificate).
//! Pure functions of the settings and the files they name; `net::tls` serves and reloads the
//! server config, `net::peer` and `controller::security` use them.

use super::security::{ClientAuth, TlsSettings};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use std::path::Path;
use std::sync::Arc;

fn read_certificates(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certificates: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("{what} {}: {e}", path.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{what} {}: {e}", path.display()))?;
    if certificates.is_empty() {
        return Err(format!("{what} {}: no CERTIFICATE in it", path.display()));
    }
    Ok(certificates)
}

/// The rustls server config of `settings`: the keystore's key and chain, and, when client
/// certificates are asked for, a verifier over the truststore's CAs.
pub fn server_config(settings: &TlsSettings) -> Result<Arc<ServerConfig>, String> {
    let keystore = &settings.keystore;
    let chain = read_certificates(keystore, "ssl.keystore.location")?;
    let key = PrivateKeyDer::from_pem_file(keystore).map_err(|e| {
        format!(
            "ssl.keystore.location {}: no usable private key ({e}; an encrypted key is not \
             supported: give it unencrypted, readable by the broker only)",
            keystore.display()
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS protocol versions: {e}"))?;
    let builder = match settings.client_auth {
        ClientAuth::None => builder.with_no_client_auth(),
        auth => {
            let Some(truststore) = &settings.truststore else {
                return Err(format!(
                    "ssl.client.auth = {auth:?} needs ssl.truststore.location (the CAs client \
                     certificates are checked against)"
                ));
            };
            let mut roots = RootCertStore::empty();
            for certificate in read_certificates(truststore, "ssl.truststore.location")? {
                roots.add(certificate).map_err(|e| {
                    format!("ssl.truststore.location {}: {e}", truststore.display())
                })?;
            }
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
            let verifier = match auth {
                ClientAuth::Requested => verifier.allow_unauthenticated(),
                _ => verifier,
            };
            let verifier = verifier.build().map_err(|e| format!("client verifier: {e}"))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| format!("ssl.keystore.location {}: {e}", keystore.display()))?;
    // Kafka clients speak no ALPN; nothing to offer.
    config.alpn_protocols.clear();
    Ok(Arc::new(config))
}

/// The rustls client config of a node reaching its peers: the truststore's CAs as roots, and
/// the keystore's key and chain as its client certificate (for `ssl.client.auth=required`).
pub fn client_config(tls: &TlsSettings) -> Result<Arc<rustls::ClientConfig>, String> {
    let truststore = tls.truststore.as_ref().ok_or("ssl.truststore.location is not set")?;
    let mut roots = rustls::RootCertStore::empty();
    for certificate in CertificateDer::pem_file_iter(truststore)
        .map_err(|e| format!("ssl.truststore.location {}: {e}", truststore.display()))?
    {
        let certificate = certificate
            .map_err(|e| format!("ssl.truststore.location {}: {e}", truststore.display()))?;
        roots
            .add(certificate)
            .map_err(|e| format!("ssl.truststore.location {}: {e}", truststore.display()))?;
    }
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&tls.keystore)
        .map_err(|e| format!("ssl.keystore.location {}: {e}", tls.keystore.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("ssl.keystore.location {}: {e}", tls.keystore.display()))?;
    let key = PrivateKeyDer::from_pem_file(&tls.keystore)
        .map_err(|e| format!("ssl.keystore.location {}: {e}", tls.keystore.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS protocol versions: {e}"))?
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .map_err(|e| format!("ssl.keystore.location {}: {e}", tls.keystore.display()))?;
    Ok(Arc::new(config))
}
