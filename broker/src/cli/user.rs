//! `strata user create|list|delete`: SCRAM users (issue #18), in the spirit of `rpk acl user`
//! and `kafka-configs --alter --add-config SCRAM-SHA-256=[...] --entity-type users`. The
//! password is salted and hashed here (PBKDF2, `sasl::scram`); the broker receives the salted
//! password (AlterUserScramCredentials), and keeps only the keys derived from it.

use super::{check, Client};
use crate::sasl::scram::{self, ScramMechanism};
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

fn mechanism(name: &str) -> Result<ScramMechanism, String> {
    ScramMechanism::from_name(name)
        .ok_or_else(|| format!("--mechanism {name}: SCRAM-SHA-256 or SCRAM-SHA-512"))
}

fn alter(bootstrap: &str, request: AlterUserScramCredentialsRequest) -> Result<(), String> {
    let mut client = Client::connect(bootstrap)?;
    let response = match client.call(
        ApiKey::AlterUserScramCredentials,
        0,
        RequestKind::AlterUserScramCredentials(request),
    )? {
        ResponseKind::AlterUserScramCredentials(response) => response,
        _ => return Err("unexpected response".into()),
    };
    for result in &response.results {
        check(result.error_code, result.error_message.as_ref(), result.user.as_str())?;
    }
    Ok(())
}

/// Sets `user`'s credential for `mechanism` (a new user, or a new password).
pub fn create(
    bootstrap: &str,
    user: &str,
    password: &str,
    mechanism_name: &str,
    iterations: i32,
) -> Result<(), String> {
    let mechanism = mechanism(mechanism_name)?;
    let salt = scram::new_salt();
    let mut upsertion = ScramCredentialUpsertion::default();
    upsertion.name = StrBytes::from_string(user.to_string());
    upsertion.mechanism = mechanism.code();
    upsertion.iterations = iterations;
    upsertion.salted_password =
        mechanism.salted_password(password.as_bytes(), &salt, iterations).into();
    upsertion.salt = salt.into();
    let mut request = AlterUserScramCredentialsRequest::default();
    request.upsertions.push(upsertion);
    alter(bootstrap, request)?;
    println!("user {user} has a {} credential ({iterations} iterations)", mechanism.name());
    Ok(())
}

/// Removes `user`'s credential for `mechanism`, or for every mechanism it has.
pub fn delete(bootstrap: &str, user: &str, mechanism_name: Option<&str>) -> Result<(), String> {
    let mechanisms = match mechanism_name {
        Some(name) => vec![mechanism(name)?],
        None => {
            let known = describe(bootstrap, Some(user))?;
            known.into_iter().map(|(_, mechanism, _)| mechanism).collect()
        }
    };
    // One alteration per user per request (Kafka refuses a user altered twice in one).
    for mechanism in mechanisms {
        let mut deletion = ScramCredentialDeletion::default();
        deletion.name = StrBytes::from_string(user.to_string());
        deletion.mechanism = mechanism.code();
        let mut request = AlterUserScramCredentialsRequest::default();
        request.deletions.push(deletion);
        alter(bootstrap, request)?;
        println!("user {user}: {} credential deleted", mechanism.name());
    }
    Ok(())
}

/// (user, mechanism, iterations) of `user`, or of every user.
fn describe(
    bootstrap: &str,
    user: Option<&str>,
) -> Result<Vec<(String, ScramMechanism, i32)>, String> {
    let mut client = Client::connect(bootstrap)?;
    let mut request = DescribeUserScramCredentialsRequest::default();
    request.users = user.map(|user| {
        let mut name = UserName::default();
        name.name = StrBytes::from_string(user.to_string());
        vec![name]
    });
    let response = match client.call(
        ApiKey::DescribeUserScramCredentials,
        0,
        RequestKind::DescribeUserScramCredentials(request),
    )? {
        ResponseKind::DescribeUserScramCredentials(response) => response,
        _ => return Err("unexpected response".into()),
    };
    check(response.error_code, response.error_message.as_ref(), "describing users")?;
    let mut rows = Vec::new();
    for result in &response.results {
        check(result.error_code, result.error_message.as_ref(), result.user.as_str())?;
        for info in &result.credential_infos {
            let Some(mechanism) = ScramMechanism::from_code(info.mechanism) else { continue };
            rows.push((result.user.to_string(), mechanism, info.iterations));
        }
    }
    Ok(rows)
}

/// Every SCRAM user: name, mechanism, iterations.
pub fn list(bootstrap: &str, json_output: bool) -> Result<(), String> {
    let rows = describe(bootstrap, None)?;
    if json_output {
        let listed: Vec<serde_json::Value> = rows
            .iter()
            .map(|(user, mechanism, iterations)| {
                serde_json::json!({"user": user, "mechanism": mechanism.name(),
                                   "iterations": iterations})
            })
            .collect();
        println!("{}", serde_json::Value::Array(listed));
        return Ok(());
    }
    println!("{:<24} {:<14} ITERATIONS", "USER", "MECHANISM");
    for (user, mechanism, iterations) in rows {
        println!("{user:<24} {:<14} {iterations}", mechanism.name());
    }
    Ok(())
}
