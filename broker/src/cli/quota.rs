//! `strata quota set|delete|list`: client byte-rate and request-time quotas (KIP-546) through AlterClientQuotas and
//! DescribeClientQuotas, in the spirit of `rpk cluster quotas` and `kafka-configs
//! --entity-type users/clients`. An entity is a user, a client id, or both; `<default>` names
//! the default of that type (Kafka's `--entity-default`).

use super::{check, Client};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

/// The entity's (type, name or `None` for `<default>`) pairs.
fn entity(
    user: Option<&str>,
    client_id: Option<&str>,
) -> Result<Vec<(&'static str, Option<String>)>, String> {
    let name = |value: &str| (value != "<default>").then(|| value.to_string());
    let mut parts = Vec::new();
    if let Some(user) = user {
        parts.push(("user", name(user)));
    }
    if let Some(client_id) = client_id {
        parts.push(("client-id", name(client_id)));
    }
    if parts.is_empty() {
        return Err(
            "name an entity: --user NAME and/or --client-id NAME (<default> for the default)"
                .into(),
        );
    }
    Ok(parts)
}

fn alter(
    bootstrap: &str,
    parts: Vec<(&'static str, Option<String>)>,
    key: &str,
    value: Option<f64>,
) -> Result<(), String> {
    let mut entry = alter_client_quotas_request::EntryData::default();
    entry.entity = parts
        .iter()
        .map(|(kind, name)| {
            let mut part = alter_client_quotas_request::EntityData::default();
            part.entity_type = StrBytes::from_static_str(kind);
            part.entity_name = name.clone().map(StrBytes::from_string);
            part
        })
        .collect();
    let mut op = alter_client_quotas_request::OpData::default();
    op.key = StrBytes::from_string(key.to_string());
    op.value = value.unwrap_or(0.0);
    op.remove = value.is_none();
    entry.ops = vec![op];
    let mut request = AlterClientQuotasRequest::default();
    request.entries = vec![entry];
    let mut client = Client::connect(bootstrap)?;
    let response =
        match client.call(ApiKey::AlterClientQuotas, 0, RequestKind::AlterClientQuotas(request))? {
            ResponseKind::AlterClientQuotas(response) => response,
            _ => return Err("unexpected response".into()),
        };
    for entry in &response.entries {
        check(entry.error_code, entry.error_message.as_ref(), "altering the quota")?;
    }
    Ok(())
}

fn describe_entity(parts: &[(&'static str, Option<String>)]) -> String {
    parts
        .iter()
        .map(|(kind, name)| format!("{kind}={}", name.as_deref().unwrap_or("<default>")))
        .collect::<Vec<_>>()
        .join(",")
}

/// Sets the entity's byte rates (`producer_byte_rate`, `consumer_byte_rate`), one request
/// each.
pub fn set(
    bootstrap: &str,
    user: Option<&str>,
    client_id: Option<&str>,
    rates: &[(&str, f64)],
) -> Result<(), String> {
    if rates.is_empty() {
        return Err(
            "give --producer-byte-rate, --consumer-byte-rate and/or --request-percentage".into()
        );
    }
    for (key, rate) in rates {
        let parts = entity(user, client_id)?;
        let shown = describe_entity(&parts);
        alter(bootstrap, parts, key, Some(*rate))?;
        println!("{shown}: {key}={rate}");
    }
    Ok(())
}

/// Removes a quota key of the entity.
pub fn delete(
    bootstrap: &str,
    user: Option<&str>,
    client_id: Option<&str>,
    key: &str,
) -> Result<(), String> {
    let parts = entity(user, client_id)?;
    let shown = describe_entity(&parts);
    alter(bootstrap, parts, key, None)?;
    println!("{shown}: {key} removed");
    Ok(())
}

/// Every entity with a quota, one line per (entity, key, value).
pub fn list(bootstrap: &str, json_output: bool) -> Result<(), String> {
    let mut client = Client::connect(bootstrap)?;
    let request = DescribeClientQuotasRequest::default();
    let response = match client.call(
        ApiKey::DescribeClientQuotas,
        0,
        RequestKind::DescribeClientQuotas(request),
    )? {
        ResponseKind::DescribeClientQuotas(response) => response,
        _ => return Err("unexpected response".into()),
    };
    check(response.error_code, response.error_message.as_ref(), "describing quotas")?;
    let mut rows = Vec::new();
    for entry in response.entries.unwrap_or_default() {
        let entity = entry
            .entity
            .iter()
            .map(|part| {
                let name = part.entity_name.as_ref().map_or("<default>", |n| n.as_str());
                format!("{}={name}", part.entity_type.as_str())
            })
            .collect::<Vec<_>>()
            .join(",");
        for value in &entry.values {
            rows.push((entity.clone(), value.key.to_string(), value.value));
        }
    }
    if json_output {
        let listed: Vec<serde_json::Value> = rows
            .iter()
            .map(|(entity, key, value)| serde_json::json!({"entity": entity, "key": key, "value": value}))
            .collect();
        println!("{}", serde_json::Value::Array(listed));
        return Ok(());
    }
    println!("{:<40} {:<22} VALUE", "ENTITY", "KEY");
    for (entity, key, value) in rows {
        println!("{entity:<40} {key:<22} {value}");
    }
    Ok(())
}
