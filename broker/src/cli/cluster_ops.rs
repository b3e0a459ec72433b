//! `strata cluster elect-leaders` (ElectLeaders: preferred, or unclean only when asked) and
//! `strata cluster config list|get|set` (dynamic broker configs: DescribeConfigs and
//! IncrementalAlterConfigs of the BROKER resource, cluster-wide as resource "" or one broker's
//! by its id, asked of that broker as Kafka requires).

use super::{check, Client};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

pub fn elect_leaders(
    bootstrap: &str,
    topic: Option<&str>,
    partitions: &[i32],
    unclean: bool,
) -> Result<(), String> {
    let mut client = Client::connect(bootstrap)?;
    let mut request = ElectLeadersRequest::default();
    request.election_type = i8::from(unclean);
    request.timeout_ms = 30_000;
    request.topic_partitions = match topic {
        None if !partitions.is_empty() => return Err("--partition needs --topic".into()),
        None => None,
        Some(topic) => {
            let mut wanted = TopicPartitions::default();
            wanted.topic = TopicName(StrBytes::from_string(topic.to_string()));
            wanted.partitions = if partitions.is_empty() {
                let metadata = super::health::Snapshot::take(bootstrap)?;
                let all: Vec<i32> = metadata
                    .partitions
                    .iter()
                    .filter(|p| p.topic == topic)
                    .map(|p| p.partition)
                    .collect();
                if all.is_empty() {
                    return Err(format!("topic {topic} does not exist"));
                }
                all
            } else {
                partitions.to_vec()
            };
            Some(vec![wanted])
        }
    };
    let response = match client.call(ApiKey::ElectLeaders, 2, RequestKind::ElectLeaders(request))? {
        ResponseKind::ElectLeaders(response) => response,
        _ => return Err("unexpected response".into()),
    };
    check(response.error_code, None, "electing leaders")?;
    let kind = if unclean { "unclean" } else { "preferred" };
    let mut failed = Vec::new();
    let mut elected = 0usize;
    for topic in response.replica_election_results {
        for result in topic.partition_result {
            let name = format!("{}-{}", topic.topic.as_str(), result.partition_id);
            match result.error_code {
                0 => {
                    elected += 1;
                    println!("{name}: {kind} leader elected");
                }
                // ELECTION_NOT_NEEDED: the partition already has the leader it would get.
                code if super::is_error(code, ResponseError::ElectionNotNeeded) => {
                    println!("{name}: already led by that replica")
                }
                code => {
                    let reason = super::error_name(code);
                    let message = result.error_message.map(|m| m.to_string()).unwrap_or_default();
                    println!("{name}: {reason} {message}");
                    failed.push(name);
                }
            }
        }
    }
    if failed.is_empty() {
        eprintln!("{elected} {kind} election(s) made");
        Ok(())
    } else {
        Err(format!("no {kind} leader for {} partition(s): {}", failed.len(), failed.join(", ")))
    }
}

/// A connection to broker `broker` (its endpoint from Metadata), or to any broker for the
/// cluster-wide resource.
fn broker_client(bootstrap: &str, broker: Option<i32>) -> Result<Client, String> {
    let Some(id) = broker else { return Client::connect(bootstrap) };
    let snapshot = super::health::Snapshot::take(bootstrap)?;
    let (_, endpoint, _) = snapshot
        .brokers
        .iter()
        .find(|(broker_id, _, _)| *broker_id == id)
        .ok_or_else(|| format!("broker {id} is not registered"))?;
    Client::connect(endpoint)
}

/// A config as `config list` shows it: name, value (none when unset), source.
type ConfigRow = (String, Option<String>, &'static str);

/// The broker resource's configs.
fn describe(
    bootstrap: &str,
    broker: Option<i32>,
    keys: Option<Vec<String>>,
) -> Result<Vec<ConfigRow>, String> {
    let mut client = broker_client(bootstrap, broker)?;
    let mut resource = describe_configs_request::DescribeConfigsResource::default();
    resource.resource_type = 4;
    resource.resource_name =
        StrBytes::from_string(broker.map(|b| b.to_string()).unwrap_or_default());
    resource.configuration_keys =
        keys.map(|keys| keys.into_iter().map(StrBytes::from_string).collect());
    let mut request = DescribeConfigsRequest::default();
    request.resources = vec![resource];
    let response =
        match client.call(ApiKey::DescribeConfigs, 1, RequestKind::DescribeConfigs(request))? {
            ResponseKind::DescribeConfigs(response) => response,
            _ => return Err("unexpected response".into()),
        };
    let mut configs = Vec::new();
    for result in response.results {
        check(result.error_code, result.error_message.as_ref(), "describing broker configs")?;
        for config in result.configs {
            // Kafka's ConfigSource codes.
            let source = match config.config_source {
                2 => "dynamic (this broker)",
                3 => "dynamic (cluster default)",
                4 => "static",
                _ => "default",
            };
            let value = if config.is_sensitive {
                Some("(sensitive)".to_string())
            } else {
                config.value.map(|v| v.to_string())
            };
            configs.push((config.name.to_string(), value, source));
        }
    }
    configs.sort();
    Ok(configs)
}

/// `strata cluster config list`: the broker's configs (with `--broker`), else the cluster-wide
/// dynamic ones.
pub fn config_list(bootstrap: &str, broker: Option<i32>, json_output: bool) -> Result<(), String> {
    let configs = describe(bootstrap, broker, None)?;
    if json_output {
        let rows: Vec<serde_json::Value> = configs
            .iter()
            .map(|(name, value, source)| serde_json::json!({"name": name, "value": value, "source": source}))
            .collect();
        println!("{}", serde_json::Value::Array(rows));
        return Ok(());
    }
    println!("{:<48} {:<32} SOURCE", "NAME", "VALUE");
    for (name, value, source) in configs {
        println!("{name:<48} {:<32} {source}", value.unwrap_or_else(|| "-".into()));
    }
    Ok(())
}

/// `strata cluster config get KEY`: its value (exit 1 when it is not set).
pub fn config_get(bootstrap: &str, broker: Option<i32>, key: &str) -> Result<(), String> {
    let configs = describe(bootstrap, broker, Some(vec![key.to_string()]))?;
    match configs.into_iter().find(|(name, _, _)| name == key) {
        Some((_, Some(value), _)) => {
            println!("{value}");
            Ok(())
        }
        _ => Err(match broker {
            Some(id) => format!("{key} is not set on broker {id}"),
            None => {
                format!("{key} has no cluster-wide dynamic value (give --broker N for a broker's)")
            }
        }),
    }
}

/// `strata cluster config set KEY=VALUE ... [--delete KEY ...]`.
pub fn config_set(
    bootstrap: &str,
    broker: Option<i32>,
    set: &[String],
    delete: &[String],
) -> Result<(), String> {
    if set.is_empty() && delete.is_empty() {
        return Err("give KEY=VALUE pairs to set, or --delete KEY".into());
    }
    let mut client = broker_client(bootstrap, broker)?;
    let name = broker.map(|b| b.to_string()).unwrap_or_default();
    let what = match broker {
        Some(id) => format!("broker {id}"),
        None => "the cluster-wide default".to_string(),
    };
    super::topic::alter_configs(&mut client, 4, &name, set, delete, &format!("altering {what}"))?;
    println!("altered {what}");
    Ok(())
}
