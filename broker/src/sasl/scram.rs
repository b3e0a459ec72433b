//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's `ScramSaslServer` runs them:
//! two SaslAuthenticate round trips, no channel binding (`n,,` only), no extensions (Kafka's
//! `tokenauth` is for delegation tokens, which strata does not issue).
//!
//! Owns: `ScramMechanism` (Kafka's mechanism codes of KIP-554), `ScramCredential` (what the
//! cluster metadata keeps: salt, StoredKey, ServerKey and iterations, never the password or the
//! salted password), the derivation of a credential from a salted password
//! (AlterUserScramCredentials) or from a password (`strata user create`), and `ScramExchange`,
//! the server side of one authentication. Pure: no I/O; randomness (the server nonce) comes in.
//! References: RFC 5802 section 3 and 5; Kafka `ScramSaslServer`, `ScramFormatter`,
//! `ScramMessages`, `ScramMechanism` (iterations 4096-16384).

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use ring::{digest, hmac, pbkdf2};
use std::num::NonZeroU32;

/// A SCRAM mechanism, with Kafka's codes (DescribeUserScramCredentials and
/// AlterUserScramCredentials `mechanism`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ScramMechanism {
    Sha256 = 1,
    Sha512 = 2,
}

/// Kafka's bounds on a credential's iterations (`ScramMechanism.minIterations`, and the
/// maximum AlterUserScramCredentials accepts).
pub const ITERATIONS_MIN: i32 = 4096;
pub const ITERATIONS_MAX: i32 = 16384;

impl ScramMechanism {
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    pub fn from_code(code: i8) -> Option<Self> {
        match code {
            1 => Some(ScramMechanism::Sha256),
            2 => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    pub fn code(self) -> i8 {
        self as i8
    }

    /// The SASL mechanism name (`SCRAM-SHA-256`).
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|mechanism| mechanism.name().eq_ignore_ascii_case(name))
    }

    fn hmac(self) -> hmac::Algorithm {
        match self {
            ScramMechanism::Sha256 => hmac::HMAC_SHA256,
            ScramMechanism::Sha512 => hmac::HMAC_SHA512,
        }
    }

    fn digest(self) -> &'static digest::Algorithm {
        match self {
            ScramMechanism::Sha256 => &digest::SHA256,
            ScramMechanism::Sha512 => &digest::SHA512,
        }
    }

    fn pbkdf2(self) -> pbkdf2::Algorithm {
        match self {
            ScramMechanism::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
            ScramMechanism::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
        }
    }

    /// The length of the mechanism's hash (and of a salted password, a key, a proof).
    pub fn hash_len(self) -> usize {
        self.digest().output_len()
    }

    /// `Hi(password, salt, iterations)` of RFC 5802: the salted password.
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: i32) -> Vec<u8> {
        let rounds = u32::try_from(iterations).ok().and_then(NonZeroU32::new);
        let rounds = rounds.unwrap_or(NonZeroU32::MIN);
        let mut out = vec![0u8; self.hash_len()];
        pbkdf2::derive(self.pbkdf2(), rounds, salt, password, &mut out);
        out
    }

    fn hmac_of(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        hmac::sign(&hmac::Key::new(self.hmac(), key), data).as_ref().to_vec()
    }
}

/// What the cluster keeps of a user's SCRAM password (Kafka's UserScramCredentialRecord).
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

impl std::fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramCredential").field("iterations", &self.iterations).finish()
    }
}

impl ScramCredential {
    /// The credential of a salted password (`Hi(password, salt, i)`, what
    /// AlterUserScramCredentials carries): StoredKey = H(HMAC(salted, "Client Key")),
    /// ServerKey = HMAC(salted, "Server Key").
    pub fn from_salted_password(
        mechanism: ScramMechanism,
        salted_password: &[u8],
        salt: &[u8],
        iterations: i32,
    ) -> Self {
        let client_key = mechanism.hmac_of(salted_password, b"Client Key");
        ScramCredential {
            salt: salt.to_vec(),
            stored_key: digest::digest(mechanism.digest(), &client_key).as_ref().to_vec(),
            server_key: mechanism.hmac_of(salted_password, b"Server Key"),
            iterations,
        }
    }
}

/// Why a SCRAM exchange failed: the message the client gets (Kafka's wording), and the user
/// name for the log when the client gave one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramFailure {
    pub message: String,
    pub user: Option<String>,
}

fn failure(message: &str, user: Option<&str>) -> ScramFailure {
    ScramFailure { message: message.to_string(), user: user.map(str::to_string) }
}

/// The server's side of one SCRAM authentication, between the client's first message and its
/// final one.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramExchange {
    pub mechanism: ScramMechanism,
    pub user: String,
    gs2_header: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
    credential: ScramCredential,
}

impl std::fmt::Debug for ScramExchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramExchange")
            .field("mechanism", &self.mechanism)
            .field("user", &self.user)
            .finish()
    }
}

/// RFC 5802's `saslname`: `=2C` is `,` and `=3D` is `=`; any other `=` is malformed.
fn decode_saslname(name: &str) -> Option<String> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        match rest.get(at..at + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return None,
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Some(out)
}

/// The value of attribute `key` (`r`, `n`...) of a `key=value` field.
fn attribute(field: Option<&str>, key: char) -> Option<&str> {
    let field = field?;
    let mut chars = field.chars();
    (chars.next() == Some(key) && chars.next() == Some('=')).then(|| &field[2..])
}

impl ScramExchange {
    /// The client's first message (`n,[a=authzid],n=user,r=nonce[,ext...]`): the user's
    /// credential from `lookup`, and the server's first message to send back
    /// (`r=nonce+server_nonce,s=salt,i=iterations`). `server_nonce` is printable and random.
    pub fn start(
        mechanism: ScramMechanism,
        client_first: &[u8],
        server_nonce: &str,
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
    ) -> Result<(Self, Vec<u8>), ScramFailure> {
        let malformed = || failure("Invalid SCRAM client first message", None);
        let message = std::str::from_utf8(client_first).map_err(|_| malformed())?;
        // gs2-header: "n" (no channel binding), then an optional authzid, then the bare part.
        let rest = message.strip_prefix("n,").ok_or_else(|| {
            failure("Invalid SCRAM client first message: channel binding is not supported", None)
        })?;
        let (authzid, bare) = rest.split_once(',').ok_or_else(malformed)?;
        let gs2_header = format!("n,{authzid},");
        let mut fields = bare.split(',');
        let first = fields.next();
        // `m=` (reserved for mandatory extensions) is refused as RFC 5802 asks.
        let name = attribute(first, 'n').ok_or_else(malformed)?;
        let user = decode_saslname(name).ok_or_else(malformed)?;
        let client_nonce = attribute(fields.next(), 'r').ok_or_else(malformed)?;
        if client_nonce.is_empty() || client_nonce.contains(',') {
            return Err(malformed());
        }
        let extensions: Vec<&str> = fields.collect();
        if !extensions.is_empty() {
            // Kafka's only extension, tokenauth=true, authenticates with a delegation token.
            return Err(failure(
                "Authentication failed: SCRAM extensions (delegation tokens) are not supported",
                Some(&user),
            ));
        }
        if let Some(authzid) = authzid.strip_prefix("a=") {
            if decode_saslname(authzid).as_deref() != Some(user.as_str()) {
                return Err(failure(
                    "Authentication failed: Client requested an authorization id that is \
                     different from username",
                    Some(&user),
                ));
            }
        } else if !authzid.is_empty() {
            return Err(malformed());
        }
        let credential = lookup(&user).ok_or_else(|| {
            failure("Authentication failed: Invalid user credentials", Some(&user))
        })?;
        let nonce = format!("{client_nonce}{server_nonce}");
        let server_first =
            format!("r={nonce},s={},i={}", BASE64.encode(&credential.salt), credential.iterations);
        let exchange = ScramExchange {
            mechanism,
            user,
            gs2_header,
            client_first_bare: bare.to_string(),
            server_first: server_first.clone(),
            nonce,
            credential,
        };
        Ok((exchange, server_first.into_bytes()))
    }

    /// The client's final message (`c=base64(gs2 header),r=nonce,p=proof`): checks the proof
    /// against the StoredKey, and answers the server's signature (`v=...`).
    pub fn finish(&self, client_final: &[u8]) -> Result<Vec<u8>, ScramFailure> {
        let user = Some(self.user.as_str());
        let malformed = || failure("Invalid SCRAM client final message", user);
        let message = std::str::from_utf8(client_final).map_err(|_| malformed())?;
        let (without_proof, proof) = message.rsplit_once(",p=").ok_or_else(malformed)?;
        let mut fields = without_proof.split(',');
        let binding = attribute(fields.next(), 'c').ok_or_else(malformed)?;
        let nonce = attribute(fields.next(), 'r').ok_or_else(malformed)?;
        if fields.next().is_some() {
            return Err(malformed());
        }
        if BASE64.decode(binding).ok().as_deref() != Some(self.gs2_header.as_bytes()) {
            return Err(failure("Invalid SCRAM client final message: channel binding", user));
        }
        if nonce != self.nonce {
            return Err(failure("Invalid SCRAM client final message: nonce mismatch", user));
        }
        let proof = BASE64.decode(proof).map_err(|_| malformed())?;
        let auth_message =
            format!("{},{},{}", self.client_first_bare, self.server_first, without_proof);
        let mechanism = self.mechanism;
        let signature = mechanism.hmac_of(&self.credential.stored_key, auth_message.as_bytes());
        let invalid = || {
            failure(
                &format!(
                    "Authentication failed during authentication due to invalid credentials \
                     with SASL mechanism {}",
                    mechanism.name()
                ),
                user,
            )
        };
        if proof.len() != signature.len() {
            return Err(invalid());
        }
        let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
        let stored_key = digest::digest(mechanism.digest(), &client_key);
        if !super::equal_in_constant_time(stored_key.as_ref(), &self.credential.stored_key) {
            return Err(invalid());
        }
        let server_signature =
            mechanism.hmac_of(&self.credential.server_key, auth_message.as_bytes());
        Ok(format!("v={}", BASE64.encode(server_signature)).into_bytes())
    }
}

/// The client's side of one SCRAM authentication (the CLI's login): its first message, its
/// final message once the server's first is in, and the check of the server's signature.
pub struct ScramClient {
    mechanism: ScramMechanism,
    password: String,
    client_first_bare: String,
    client_nonce: String,
}

/// RFC 5802's `saslname` of a user name: `,` as `=2C` and `=` as `=3D`.
fn encode_saslname(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

impl ScramClient {
    /// The client and its first message (`n,,n=user,r=nonce`); `client_nonce` is printable and
    /// random.
    pub fn start(
        mechanism: ScramMechanism,
        user: &str,
        password: &str,
        client_nonce: &str,
    ) -> (Self, Vec<u8>) {
        let client_first_bare = format!("n={},r={client_nonce}", encode_saslname(user));
        let first = format!("n,,{client_first_bare}").into_bytes();
        let client = ScramClient {
            mechanism,
            password: password.to_string(),
            client_first_bare,
            client_nonce: client_nonce.to_string(),
        };
        (client, first)
    }

    /// The final message for the server's first (`r=nonce,s=salt,i=iterations`), and the
    /// server signature its final message must carry. A nonce that does not extend the
    /// client's or fewer than `ITERATIONS_MIN` iterations are refused, as Kafka's client does.
    pub fn finish(&self, server_first: &[u8]) -> Result<(Vec<u8>, Vec<u8>), String> {
        let malformed = || "an invalid SCRAM server first message".to_string();
        let message = std::str::from_utf8(server_first).map_err(|_| malformed())?;
        let mut fields = message.split(',');
        let nonce = attribute(fields.next(), 'r').ok_or_else(malformed)?;
        let salt = attribute(fields.next(), 's').ok_or_else(malformed)?;
        let iterations = attribute(fields.next(), 'i').ok_or_else(malformed)?;
        if !nonce.starts_with(&self.client_nonce) || nonce.len() == self.client_nonce.len() {
            return Err("the server's SCRAM nonce does not extend the client's".into());
        }
        let salt = BASE64.decode(salt).map_err(|_| malformed())?;
        let iterations: i32 = iterations.parse().map_err(|_| malformed())?;
        if !(ITERATIONS_MIN..=ITERATIONS_MAX).contains(&iterations) {
            return Err(format!("the server asks for {iterations} SCRAM iterations"));
        }
        let mechanism = self.mechanism;
        let salted = mechanism.salted_password(self.password.as_bytes(), &salt, iterations);
        let client_key = mechanism.hmac_of(&salted, b"Client Key");
        let stored_key = digest::digest(mechanism.digest(), &client_key);
        // "biws" is base64("n,,"): no channel binding, no authzid.
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{message},{without_proof}", self.client_first_bare);
        let signature = mechanism.hmac_of(stored_key.as_ref(), auth_message.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(k, s)| k ^ s).collect();
        let server_key = mechanism.hmac_of(&salted, b"Server Key");
        let server_signature = mechanism.hmac_of(&server_key, auth_message.as_bytes());
        let client_final = format!("{without_proof},p={}", BASE64.encode(proof));
        Ok((client_final.into_bytes(), server_signature))
    }

    /// Checks the server's final message (`v=signature`) against the expected signature.
    pub fn verify(expected_signature: &[u8], server_final: &[u8]) -> Result<(), String> {
        let message = std::str::from_utf8(server_final).unwrap_or_default();
        let Some(signature) = message.strip_prefix("v=") else {
            return Err(format!("the server refused the SCRAM login: {message}"));
        };
        let signature = BASE64.decode(signature).unwrap_or_default();
        if super::equal_in_constant_time(&signature, expected_signature) {
            Ok(())
        } else {
            Err("the server's SCRAM signature is wrong: it does not know the password".into())
        }
    }
}

/// A printable random nonce for the server's half (`rand`'s generator, seeded by the OS).
pub fn server_nonce() -> String {
    use rand::distributions::{Alphanumeric, DistString};
    Alphanumeric.sample_string(&mut rand::thread_rng(), 32)
}

/// A random salt for a new credential (`strata user create`).
pub fn new_salt() -> Vec<u8> {
    use rand::RngCore;
    let mut salt = vec![0u8; 32];
    rand::thread_rng().fill_bytes(&mut salt);
    salt
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client's side of the exchange, as RFC 5802 section 3 computes it.
    fn client_final(
        mechanism: ScramMechanism,
        password: &str,
        client_first_bare: &str,
        server_first: &str,
    ) -> (String, Vec<u8>) {
        let fields: Vec<&str> = server_first.split(',').collect();
        let nonce = &fields[0][2..];
        let salt = BASE64.decode(&fields[1][2..]).expect("salt");
        let iterations: i32 = fields[2][2..].parse().expect("iterations");
        let salted = mechanism.salted_password(password.as_bytes(), &salt, iterations);
        let client_key = mechanism.hmac_of(&salted, b"Client Key");
        let stored_key = digest::digest(mechanism.digest(), &client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
        let signature = mechanism.hmac_of(stored_key.as_ref(), auth_message.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(k, s)| k ^ s).collect();
        let server_key = mechanism.hmac_of(&salted, b"Server Key");
        let server_signature = mechanism.hmac_of(&server_key, auth_message.as_bytes());
        (format!("{without_proof},p={}", BASE64.encode(proof)), server_signature)
    }

    fn credential(mechanism: ScramMechanism, password: &str) -> ScramCredential {
        let salt = b"0123456789abcdef".to_vec();
        let salted = mechanism.salted_password(password.as_bytes(), &salt, 4096);
        ScramCredential::from_salted_password(mechanism, &salted, &salt, 4096)
    }

    #[test]
    fn rfc_7677_test_vector_derives_the_same_keys() {
        // RFC 7677 section 3: user "user", password "pencil", salt W22ZaJ0SNY7soEsUEjb6gQ==,
        // 4096 iterations; the server signature of its exchange is
        // 6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=.
        let mechanism = ScramMechanism::Sha256;
        let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").expect("salt");
        let salted = mechanism.salted_password(b"pencil", &salt, 4096);
        let credential = ScramCredential::from_salted_password(mechanism, &salted, &salt, 4096);
        let client_first = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
        let (exchange, server_first) = ScramExchange::start(
            mechanism,
            client_first,
            "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
            |user| (user == "user").then(|| credential.clone()),
        )
        .expect("first");
        assert_eq!(
            String::from_utf8(server_first).expect("utf8"),
            "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
        );
        let client_final = b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
            p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
        let server_final = exchange.finish(client_final).expect("proof");
        assert_eq!(
            String::from_utf8(server_final).expect("utf8"),
            "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
    }

    #[test]
    fn both_mechanisms_accept_the_password_and_refuse_another() {
        for mechanism in ScramMechanism::ALL {
            let stored = credential(mechanism, "secret");
            let bare = "n=alice,r=clientnonce";
            let (exchange, server_first) = ScramExchange::start(
                mechanism,
                format!("n,,{bare}").as_bytes(),
                "servernonce",
                |_| Some(stored.clone()),
            )
            .expect("first");
            let server_first = String::from_utf8(server_first).expect("utf8");
            let (good, signature) = client_final(mechanism, "secret", bare, &server_first);
            let answer = exchange.finish(good.as_bytes()).expect("right password");
            assert_eq!(answer, format!("v={}", BASE64.encode(signature)).into_bytes());
            let (bad, _) = client_final(mechanism, "Secret", bare, &server_first);
            let refused = exchange.finish(bad.as_bytes()).expect_err("wrong password");
            assert!(refused.message.contains(mechanism.name()), "{refused:?}");
            assert_eq!(refused.user.as_deref(), Some("alice"));
        }
    }

    #[test]
    fn the_client_side_logs_in_against_the_server_side_and_checks_its_signature() {
        for mechanism in ScramMechanism::ALL {
            let stored = credential(mechanism, "secret");
            let (client, first) = ScramClient::start(mechanism, "al,i=ce", "secret", "cnonce");
            let (exchange, server_first) =
                ScramExchange::start(mechanism, &first, "snonce", |user| {
                    (user == "al,i=ce").then(|| stored.clone())
                })
                .expect("first");
            let (client_final, expected) = client.finish(&server_first).expect("final");
            let server_final = exchange.finish(&client_final).expect("proof");
            ScramClient::verify(&expected, &server_final).expect("the server knows the password");
            assert!(ScramClient::verify(&expected, b"v=AAAA").is_err());
            assert!(ScramClient::verify(&expected, b"e=invalid-proof").is_err());
            let (wrong, _) = ScramClient::start(mechanism, "al,i=ce", "Secret", "cnonce");
            let (client_final, _) = wrong.finish(&server_first).expect("final");
            assert!(exchange.finish(&client_final).is_err(), "a wrong password is refused");
            // A server nonce that does not extend the client's is refused.
            assert!(client.finish(b"r=other,s=c2FsdA==,i=4096").is_err());
            assert!(client.finish(b"r=cnonce,s=c2FsdA==,i=4096").is_err());
            assert!(client.finish(b"r=cnonceX,s=c2FsdA==,i=10").is_err());
        }
    }

    #[test]
    fn malformed_and_unsupported_first_messages_are_refused() {
        let stored = credential(ScramMechanism::Sha256, "pw");
        for bad in [
            &b"y,,n=alice,r=abc"[..],
            b"p=tls-unique,,n=alice,r=abc",
            b"n,,n=alice",
            b"n,,r=abc,n=alice",
            b"n,,n=al=ice,r=abc",
            b"n,,n=alice,r=abc,tokenauth=true",
            b"n,a=bob,n=alice,r=abc",
            b"\xff\xfe",
            b"",
        ] {
            let outcome =
                ScramExchange::start(ScramMechanism::Sha256, bad, "s", |_| Some(stored.clone()));
            assert!(outcome.is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        let unknown =
            ScramExchange::start(ScramMechanism::Sha256, b"n,,n=nobody,r=abc", "s", |_| None);
        assert_eq!(unknown.expect_err("unknown user").user.as_deref(), Some("nobody"));
        let escaped =
            ScramExchange::start(ScramMechanism::Sha256, b"n,,n=a=2Cb=3D,r=x", "s", |u| {
                (u == "a,b=").then(|| stored.clone())
            });
        assert_eq!(escaped.expect("escaped name").0.user, "a,b=");
    }

    #[test]
    fn a_final_message_with_another_nonce_or_binding_is_refused() {
        let mechanism = ScramMechanism::Sha512;
        let stored = credential(mechanism, "pw");
        let bare = "n=alice,r=abc";
        let (exchange, server_first) =
            ScramExchange::start(mechanism, format!("n,,{bare}").as_bytes(), "def", |_| {
                Some(stored.clone())
            })
            .expect("first");
        let server_first = String::from_utf8(server_first).expect("utf8");
        let (good, _) = client_final(mechanism, "pw", bare, &server_first);
        for bad in [
            good.replace("r=abcdef", "r=abcdeX"),
            good.replace("c=biws", "c=eSws"),
            good.replace(",p=", ",x="),
            "garbage".to_string(),
        ] {
            assert!(exchange.finish(bad.as_bytes()).is_err(), "{bad}");
        }
        assert!(exchange.finish(good.as_bytes()).is_ok());
    }
}
