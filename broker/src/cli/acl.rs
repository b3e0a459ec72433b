//! `strata acl create|list|delete`: ACLs (issue #18) through CreateAcls, DescribeAcls and
//! DeleteAcls, in the spirit of `rpk security acl` and `kafka-acls`: a resource (`--topic`,
//! `--group`, `--transactional-id` or `--cluster`, LITERAL or `--prefixed`), principals
//! (`--allow-principal` / `--deny-principal`, `User:name`), operations (`--operation read,write`)
//! and a host (`--host`, default `*`).

use super::{check, Client};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

/// The resource an ACL command names; `None` in a filter matches any.
#[derive(Debug, Clone, Default)]
pub struct AclResource {
    pub topic: Option<String>,
    pub group: Option<String>,
    pub transactional_id: Option<String>,
    pub cluster: bool,
    pub prefixed: bool,
}

impl AclResource {
    /// (resource type code, name): `None` when no resource is named.
    fn named(&self) -> Result<Option<(i8, String)>, String> {
        let mut named = Vec::new();
        if let Some(topic) = &self.topic {
            named.push((2, topic.clone()));
        }
        if let Some(group) = &self.group {
            named.push((3, group.clone()));
        }
        if self.cluster {
            named.push((4, "kafka-cluster".to_string()));
        }
        if let Some(id) = &self.transactional_id {
            named.push((5, id.clone()));
        }
        match named.len() {
            0 => Ok(None),
            1 => Ok(named.pop()),
            _ => Err("name one resource: --topic, --group, --transactional-id or --cluster".into()),
        }
    }

    fn pattern(&self) -> i8 {
        if self.prefixed {
            4
        } else {
            3
        }
    }
}

const OPERATIONS: [(&str, i8); 11] = [
    ("all", 2),
    ("read", 3),
    ("write", 4),
    ("create", 5),
    ("delete", 6),
    ("alter", 7),
    ("describe", 8),
    ("cluster_action", 9),
    ("describe_configs", 10),
    ("alter_configs", 11),
    ("idempotent_write", 12),
];

fn operation_code(name: &str) -> Result<i8, String> {
    let wanted = name.trim().to_ascii_lowercase().replace('-', "_");
    OPERATIONS.iter().find(|(known, _)| *known == wanted).map(|(_, code)| *code).ok_or_else(|| {
        let names: Vec<&str> = OPERATIONS.iter().map(|(known, _)| *known).collect();
        format!("unknown operation {name:?}: one of {}", names.join(", "))
    })
}

fn operation_name(code: i8) -> String {
    OPERATIONS
        .iter()
        .find(|(_, known)| *known == code)
        .map_or(format!("operation {code}"), |(name, _)| name.to_ascii_uppercase())
}

fn resource_type_name(code: i8) -> &'static str {
    match code {
        2 => "TOPIC",
        3 => "GROUP",
        4 => "CLUSTER",
        5 => "TRANSACTIONAL_ID",
        _ => "UNKNOWN",
    }
}

fn principal(name: &str) -> String {
    if name.contains(':') {
        name.to_string()
    } else {
        format!("User:{name}")
    }
}

/// Creates an ACL for every (principal, operation) pair.
pub fn create(
    bootstrap: &str,
    resource: &AclResource,
    allow: &[String],
    deny: &[String],
    operations: &[String],
    host: &str,
) -> Result<(), String> {
    let (resource_type, name) = resource.named()?.ok_or("name a resource to create ACLs on")?;
    if allow.is_empty() && deny.is_empty() {
        return Err("give --allow-principal and/or --deny-principal".into());
    }
    if operations.is_empty() {
        return Err("give --operation (read, write, describe, ..., or all)".into());
    }
    let mut creations = Vec::new();
    let principals =
        allow.iter().map(|p| (p, 3)).chain(deny.iter().map(|p| (p, 2))).collect::<Vec<_>>();
    for (who, permission) in &principals {
        for operation in operations {
            let mut creation = create_acls_request::AclCreation::default();
            creation.resource_type = resource_type;
            creation.resource_name = StrBytes::from_string(name.clone());
            creation.resource_pattern_type = resource.pattern();
            creation.principal = StrBytes::from_string(principal(who));
            creation.host = StrBytes::from_string(host.to_string());
            creation.operation = operation_code(operation)?;
            creation.permission_type = *permission;
            creations.push(creation);
        }
    }
    let mut request = CreateAclsRequest::default();
    request.creations = creations.clone();
    let mut client = Client::connect(bootstrap)?;
    let response = match client.call(ApiKey::CreateAcls, 1, RequestKind::CreateAcls(request))? {
        ResponseKind::CreateAcls(response) => response,
        _ => return Err("unexpected response".into()),
    };
    if authorizer_enabled(&mut client) == Some(false) {
        eprintln!(
            "warning: {} enforces no ACLs (authorizer.class.name is not set): these ACLs are \
             stored, and every client may still do everything",
            client.address()
        );
    }
    for (creation, result) in creations.iter().zip(&response.results) {
        check(result.error_code, result.error_message.as_ref(), "creating the ACL")?;
        println!(
            "created: {} {} {} {} {} host={}",
            if creation.permission_type == 3 { "ALLOW" } else { "DENY" },
            creation.principal.as_str(),
            operation_name(creation.operation),
            resource_type_name(creation.resource_type),
            if resource.prefixed { format!("{name}*") } else { name.clone() },
            creation.host.as_str(),
        );
    }
    Ok(())
}

/// The filter of `list` and `delete`: the named resource (exactly, LITERAL or PREFIXED), or any.
fn filter(
    resource: &AclResource,
    principal_filter: Option<&str>,
) -> Result<(i8, Option<String>, i8, Option<String>), String> {
    let principal_filter = principal_filter.map(principal);
    Ok(match resource.named()? {
        Some((kind, name)) => (kind, Some(name), resource.pattern(), principal_filter),
        None => (1, None, 1, principal_filter),
    })
}

/// Lists the ACLs the filter matches, one line each.
pub fn list(
    bootstrap: &str,
    resource: &AclResource,
    principal_filter: Option<&str>,
    json_output: bool,
) -> Result<(), String> {
    let (kind, name, pattern, principal) = filter(resource, principal_filter)?;
    let mut request = DescribeAclsRequest::default();
    request.resource_type_filter = kind;
    request.resource_name_filter = name.map(StrBytes::from_string);
    request.pattern_type_filter = pattern;
    request.principal_filter = principal.map(StrBytes::from_string);
    request.host_filter = None; // kafka-protocol's default is Some(""), which matches no ACL
    request.operation = 1;
    request.permission_type = 1;
    let mut client = Client::connect(bootstrap)?;
    let response = match client.call(ApiKey::DescribeAcls, 1, RequestKind::DescribeAcls(request))? {
        ResponseKind::DescribeAcls(response) => response,
        _ => return Err("unexpected response".into()),
    };
    check(response.error_code, response.error_message.as_ref(), "listing ACLs")?;
    let mut rows = Vec::new();
    for resource in &response.resources {
        for acl in &resource.acls {
            rows.push([
                acl.principal.to_string(),
                (if acl.permission_type == 3 { "ALLOW" } else { "DENY" }).to_string(),
                operation_name(acl.operation).to_string(),
                resource_type_name(resource.resource_type).to_string(),
                resource.resource_name.to_string(),
                (if resource.pattern_type == 4 { "PREFIXED" } else { "LITERAL" }).to_string(),
                acl.host.to_string(),
            ]);
        }
    }
    if json_output {
        let listed: Vec<serde_json::Value> = rows
            .iter()
            .map(|[principal, permission, operation, kind, name, pattern, host]| {
                serde_json::json!({"principal": principal, "permission": permission,
                    "operation": operation, "resource_type": kind, "resource_name": name,
                    "pattern_type": pattern, "host": host})
            })
            .collect();
        println!("{}", serde_json::Value::Array(listed));
        return Ok(());
    }
    println!(
        "{:<24} {:<6} {:<18} {:<16} {:<30} {:<9} HOST",
        "PRINCIPAL", "PERM", "OPERATION", "TYPE", "RESOURCE", "PATTERN"
    );
    for [principal, permission, operation, kind, name, pattern, host] in rows {
        println!(
            "{principal:<24} {permission:<6} {operation:<18} {kind:<16} {name:<30} {pattern:<9} {host}"
        );
    }
    Ok(())
}

/// Deletes the ACLs the filter matches (a resource, a principal, or both: deleting every ACL
/// needs `--all`).
pub fn delete(
    bootstrap: &str,
    resource: &AclResource,
    principal_filter: Option<&str>,
    all: bool,
) -> Result<(), String> {
    let (kind, name, pattern, principal) = filter(resource, principal_filter)?;
    if kind == 1 && principal.is_none() && !all {
        return Err("name a resource and/or --principal (or --all to delete every ACL)".into());
    }
    let mut acl_filter = delete_acls_request::DeleteAclsFilter::default();
    acl_filter.resource_type_filter = kind;
    acl_filter.resource_name_filter = name.map(StrBytes::from_string);
    acl_filter.pattern_type_filter = pattern;
    acl_filter.principal_filter = principal.map(StrBytes::from_string);
    acl_filter.host_filter = None; // kafka-protocol's default is Some(""), which matches no ACL
    acl_filter.operation = 1;
    acl_filter.permission_type = 1;
    let mut request = DeleteAclsRequest::default();
    request.filters = vec![acl_filter];
    let mut client = Client::connect(bootstrap)?;
    let response = match client.call(ApiKey::DeleteAcls, 1, RequestKind::DeleteAcls(request))? {
        ResponseKind::DeleteAcls(response) => response,
        _ => return Err("unexpected response".into()),
    };
    for result in &response.filter_results {
        check(result.error_code, result.error_message.as_ref(), "deleting ACLs")?;
        for acl in &result.matching_acls {
            println!(
                "deleted: {} {} {} {} {}{}",
                if acl.permission_type == 3 { "ALLOW" } else { "DENY" },
                acl.principal.as_str(),
                operation_name(acl.operation),
                resource_type_name(acl.resource_type),
                acl.resource_name.as_str(),
                if acl.pattern_type == 4 { "*" } else { "" },
            );
        }
        if result.matching_acls.is_empty() {
            println!("no ACL matched");
        }
    }
    Ok(())
}

/// Whether the broker `client` is connected to runs an authorizer (its
/// `authorizer.class.name`, from DescribeConfigs of each broker Metadata lists until one
/// answers); `None` when none says.
fn authorizer_enabled(client: &mut Client) -> Option<bool> {
    let ResponseKind::Metadata(metadata) =
        client.call(ApiKey::Metadata, 9, RequestKind::Metadata(MetadataRequest::default())).ok()?
    else {
        return None;
    };
    for broker in metadata.brokers {
        let mut resource = describe_configs_request::DescribeConfigsResource::default();
        resource.resource_type = 4;
        resource.resource_name = StrBytes::from_string(broker.node_id.0.to_string());
        resource.configuration_keys =
            Some(vec![StrBytes::from_static_str("authorizer.class.name")]);
        let mut request = DescribeConfigsRequest::default();
        request.resources = vec![resource];
        let Ok(ResponseKind::DescribeConfigs(response)) =
            client.call(ApiKey::DescribeConfigs, 1, RequestKind::DescribeConfigs(request))
        else {
            continue;
        };
        if let Some(result) = response.results.into_iter().find(|r| r.error_code == 0) {
            let value = result
                .configs
                .into_iter()
                .find(|config| config.name.as_str() == "authorizer.class.name")
                .and_then(|config| config.value);
            return Some(value.is_some_and(|value| !value.is_empty()));
        }
    }
    None
}
