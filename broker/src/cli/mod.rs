//! The operator CLI in the spirit of Redpanda's rpk: `strata topic ...`, `strata produce`,
//! `strata consume`. Each command talks to a running broker over the Kafka protocol.

mod client;
pub mod consume;
pub mod doctor;
pub mod group;
pub mod produce;
pub mod topic;

pub use client::Client;

/// Kafka's name for an error code, for messages.
pub fn error_name(code: i16) -> String {
    use crate::error::code::*;
    let name = match code {
        NONE => "NONE",
        OFFSET_OUT_OF_RANGE => "OFFSET_OUT_OF_RANGE",
        CORRUPT_MESSAGE => "CORRUPT_MESSAGE",
        UNKNOWN_TOPIC_OR_PARTITION => "UNKNOWN_TOPIC_OR_PARTITION",
        MESSAGE_TOO_LARGE => "MESSAGE_TOO_LARGE",
        INVALID_TOPIC_EXCEPTION => "INVALID_TOPIC_EXCEPTION",
        TOPIC_ALREADY_EXISTS => "TOPIC_ALREADY_EXISTS",
        INVALID_PARTITIONS => "INVALID_PARTITIONS",
        INVALID_CONFIG => "INVALID_CONFIG",
        INVALID_REQUEST => "INVALID_REQUEST",
        NON_EMPTY_GROUP => "NON_EMPTY_GROUP",
        GROUP_ID_NOT_FOUND => "GROUP_ID_NOT_FOUND",
        other => return format!("error code {other}"),
    };
    name.to_string()
}

/// `Err` with the error name when `code` is not NONE.
pub fn check(
    code: i16,
    message: Option<&kafka_protocol::protocol::StrBytes>,
    what: &str,
) -> Result<(), String> {
    if code == crate::error::code::NONE {
        return Ok(());
    }
    match message {
        Some(message) => Err(format!("{what}: {} ({message})", error_name(code))),
        None => Err(format!("{what}: {}", error_name(code))),
    }
}
