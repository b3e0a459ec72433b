//! The operator CLI in the spirit of Redpanda's rpk: `strata topic ...`, `strata produce`,
//! `strata consume`, `strata cluster status|local`. Each command talks to a running broker over the Kafka protocol, except
//! `doctor` and `recover-metadata`, which work on this host and its data directory.

pub mod acl;
pub mod cert;
mod client;
pub mod cluster;
pub mod cluster_ops;
pub mod consume;
pub mod doctor;
pub mod format;
pub mod group;
pub mod health;
pub mod produce;
pub mod quota;
pub mod recover_metadata;
pub mod security;
mod share_group;
pub mod topic;
pub mod txn;
pub mod user;

pub use client::Client;

/// Kafka's name for an error code (`TOPIC_ALREADY_EXISTS`), for messages.
pub fn error_name(code: i16) -> String {
    let Some(error) = kafka_protocol::error::ResponseError::try_from_code(code) else {
        return "NONE".to_string();
    };
    if let kafka_protocol::error::ResponseError::Unknown(code) = error {
        return format!("error code {code}");
    }
    // The generated name is the Java enum's in CamelCase: TopicAlreadyExists.
    let mut name = String::new();
    for (index, character) in error.to_string().chars().enumerate() {
        if character.is_ascii_uppercase() && index > 0 {
            name.push('_');
        }
        name.push(character.to_ascii_uppercase());
    }
    name
}

/// Whether a response's `code` is `error` (the CLI reads codes; it never makes them).
pub fn is_error(code: i16, error: kafka_protocol::error::ResponseError) -> bool {
    code == error.code()
}

/// `Err` with the error name when `code` is not NONE.
pub fn check(
    code: i16,
    message: Option<&kafka_protocol::protocol::StrBytes>,
    what: &str,
) -> Result<(), String> {
    if code == crate::error::NONE {
        return Ok(());
    }
    match message {
        Some(message) => Err(format!("{what}: {} ({message})", error_name(code))),
        None => Err(format!("{what}: {}", error_name(code))),
    }
}
