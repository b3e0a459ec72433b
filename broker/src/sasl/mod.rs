//! SASL mechanisms (issue #18): PLAIN (RFC 4616) here, SCRAM-SHA-256 and -512 in `scram`.
//! Pure functions of a token and the credentials (PLAIN's configured users, SCRAM's from the
//! cluster metadata); the connection's state is `request_context::Session`, the
//! exchange is the SaslHandshake and SaslAuthenticate handlers', and the listeners' gating
//! (nothing but ApiVersions and SASL before authentication) is `net::connection`'s.

pub mod scram;

use std::collections::BTreeMap;

/// Why an authentication failed, as the client is told (never which part was wrong).
pub const AUTHENTICATION_FAILED: &str = "Authentication failed: Invalid username or password";

/// PLAIN (RFC 4616): `[authzid] NUL authcid NUL passwd`, checked against the configured users
/// in constant time per byte. The user name on success; on failure the user name the client
/// gave (for the log), if any.
pub fn plain(token: &[u8], users: &BTreeMap<String, String>) -> Result<String, Option<String>> {
    let mut parts = token.split(|byte| *byte == 0);
    let (Some(authzid), Some(user), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(None);
    };
    let Ok(user) = std::str::from_utf8(user) else { return Err(None) };
    // Kafka: an authorization id other than the user is refused.
    if !authzid.is_empty() && authzid != user.as_bytes() {
        return Err(Some(user.to_string()));
    }
    let expected = users.get(user).map(String::as_bytes);
    let matches = expected.is_some_and(|expected| equal_in_constant_time(expected, password));
    if matches {
        Ok(user.to_string())
    } else {
        Err(Some(user.to_string()))
    }
}

/// Whether `a == b`, in a time that depends on their lengths only.
pub fn equal_in_constant_time(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_tokens_are_checked() {
        let users = BTreeMap::from([("alice".to_string(), "pw".to_string())]);
        assert_eq!(plain(b"\0alice\0pw", &users), Ok("alice".into()));
        assert_eq!(plain(b"alice\0alice\0pw", &users), Ok("alice".into()));
        assert_eq!(plain(b"\0alice\0pW", &users), Err(Some("alice".into())));
        assert_eq!(plain(b"bob\0alice\0pw", &users), Err(Some("alice".into())));
        assert_eq!(plain(b"\0mallory\0pw", &users), Err(Some("mallory".into())));
        assert_eq!(plain(b"garbage", &users), Err(None));
        assert_eq!(plain(b"\0a\0b\0c", &users), Err(None));
    }
}
