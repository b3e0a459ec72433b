//! `strata cert self-signed`: certificates for trying the SSL listener. It writes a CA and
//! a broker certificate the CA signs, for the hosts given (their names and IP addresses):
//!
//! - `ca.pem`, which clients trust (`ssl.ca.location`);
//! - `broker.pem`, the broker's key and certificate chain (`ssl.keystore.location`);
//! - `client.pem` and `client.key`, for mTLS (`ssl.client.auth=required`).
//!
//! For trying TLS only: a production broker's certificate comes from the operator's CA.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use std::path::Path;

/// How long the certificates are valid.
const VALID_DAYS: i64 = 365;

fn params(common_name: &str) -> Result<CertificateParams, String> {
    let mut params = CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(DnType::OrganizationName, "strata");
    params.distinguished_name.push(DnType::CommonName, common_name);
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::minutes(5);
    params.not_after = now + time::Duration::days(VALID_DAYS);
    Ok(params)
}

fn write(directory: &Path, name: &str, contents: &str, private: bool) -> Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = directory.join(name);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true).mode(if private { 0o600 } else { 0o644 });
    let mut file = options.open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    std::io::Write::write_all(&mut file, contents.as_bytes())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    println!("wrote {}", path.display());
    Ok(())
}

pub fn self_signed(directory: &Path, hosts: &[String]) -> Result<(), String> {
    std::fs::create_dir_all(directory).map_err(|e| format!("{}: {e}", directory.display()))?;
    let error = |e: rcgen::Error| e.to_string();
    let ca_key = KeyPair::generate().map_err(error)?;
    let mut ca_params = params("strata self-signed CA")?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = ca_params.self_signed(&ca_key).map_err(error)?;
    let issuer = Issuer::new(ca_params, &ca_key);

    let broker_key = KeyPair::generate().map_err(error)?;
    let mut broker_params = params(hosts.first().map_or("localhost", String::as_str))?;
    broker_params.subject_alt_names = hosts
        .iter()
        .map(|host| match host.parse::<std::net::IpAddr>() {
            Ok(ip) => Ok(SanType::IpAddress(ip)),
            Err(_) => host.clone().try_into().map(SanType::DnsName).map_err(error),
        })
        .collect::<Result<_, _>>()?;
    broker_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let broker = broker_params.signed_by(&broker_key, &issuer).map_err(error)?;

    let client_key = KeyPair::generate().map_err(error)?;
    let mut client_params = params("strata-client")?;
    client_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let client = client_params.signed_by(&client_key, &issuer).map_err(error)?;

    write(directory, "ca.pem", &ca.pem(), false)?;
    let keystore = format!("{}{}{}", broker_key.serialize_pem(), broker.pem(), ca.pem());
    write(directory, "broker.pem", &keystore, true)?;
    write(directory, "client.pem", &client.pem(), false)?;
    write(directory, "client.key", &client_key.serialize_pem(), true)?;
    let dir = directory.display();
    println!(
        "\nbroker:  --set listeners=PLAINTEXT://127.0.0.1:9092,SSL://0.0.0.0:9093 \\\n         \
         --set ssl.keystore.location={dir}/broker.pem \\\n         \
         --set ssl.truststore.location={dir}/ca.pem   (for ssl.client.auth)\n\
         clients: security.protocol=SSL ssl.ca.location={dir}/ca.pem\n\
         mTLS:    ssl.certificate.location={dir}/client.pem ssl.key.location={dir}/client.key"
    );
    Ok(())
}
