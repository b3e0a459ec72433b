//! Partition data without `strata-metadata.json`: found at startup (which refuses to start a new
//! cluster over it, as Kafka refuses without `meta.properties`) and rebuilt on request by
//! `strata recover-metadata`.
//!
//! The topic table is rebuilt from the partition directories (`<topic>-<partition>` holding a
//! segment file): each topic gets as many partitions as its highest directory index + 1, a new
//! topic id, and default configs; the cluster gets a new id. What the directories cannot tell
//! (topic config overrides, the cluster id) is printed as lost, for the operator to set again.
//! `__consumer_offsets` is left to startup, which recreates it with its fixed definition and
//! adopts its directories.

use super::apply::apply_all;
use super::decide::{create_topic, CreateTopic};
use super::internal::is_internal;
use super::placement::PlacementPolicy;
use super::store;
use super::topic_config::validate_topic_name;
use std::collections::BTreeMap;
use std::path::Path;

/// Topics with partition data in `data_dir`: name → the partition indexes found.
pub fn partition_directories(data_dir: &Path) -> std::io::Result<BTreeMap<String, Vec<i32>>> {
    let mut topics: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    let entries = match std::fs::read_dir(data_dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(topics),
        Err(error) => return Err(error),
    };
    for entry in entries {
        let entry = entry?;
        if !entry.file_type()?.is_dir() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((topic, index)) = name.rsplit_once('-') else { continue };
        let Ok(index) = index.parse::<i32>() else { continue };
        if index < 0 || validate_topic_name(topic).is_err() {
            continue;
        }
        let has_segment = std::fs::read_dir(entry.path())?
            .filter_map(|file| file.ok())
            .any(|file| file.file_name().to_string_lossy().ends_with(".log"));
        if has_segment {
            topics.entry(topic.to_string()).or_default().push(index);
        }
    }
    for indexes in topics.values_mut() {
        indexes.sort_unstable();
    }
    Ok(topics)
}

/// Why a start without `strata-metadata.json` over `data_dir` is refused, if it is.
pub fn refuse_without_metadata(data_dir: &Path) -> Result<(), String> {
    let topics = partition_directories(data_dir)
        .map_err(|error| format!("{}: {error}", data_dir.display()))?;
    if topics.is_empty() {
        return Ok(());
    }
    let partitions: usize = topics.values().map(Vec::len).sum();
    let names: Vec<&str> = topics.keys().map(String::as_str).take(5).collect();
    Err(format!(
        "{} is missing but {} holds {partitions} partition directories of {} topics ({}{}): \
         refusing to start a new cluster over them. Restore {} from a backup, or rebuild the \
         topic table from the directories with `strata recover-metadata --data-dir {}` (topic \
         config overrides and the cluster id cannot be recovered that way)",
        store::METADATA_FILE,
        data_dir.display(),
        topics.len(),
        names.join(", "),
        if topics.len() > names.len() { ", ..." } else { "" },
        store::METADATA_FILE,
        data_dir.display(),
    ))
}

/// What `recover` rebuilt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered {
    pub json: Vec<u8>,
    /// (topic, partitions, indexes missing a directory: created empty).
    pub topics: Vec<(String, i32, Vec<i32>)>,
}

/// Rebuilds the metadata file's contents from the partition directories of `data_dir`, under
/// `cluster_id` (the directory's `meta.properties` one) or a new id.
pub fn recover(
    data_dir: &Path,
    policy: PlacementPolicy,
    cluster_id: Option<&str>,
) -> Result<Recovered, String> {
    let found = partition_directories(data_dir)
        .map_err(|error| format!("{}: {error}", data_dir.display()))?;
    let mut image = store::new_cluster();
    if let Some(id) = cluster_id {
        image.cluster_id = id.to_string();
    }
    let mut topics = Vec::new();
    for (name, indexes) in found.iter().filter(|(name, _)| !is_internal(name)) {
        let partitions = indexes.last().map_or(0, |last| last + 1);
        let missing: Vec<i32> =
            (0..partitions).filter(|index| indexes.binary_search(index).is_err()).collect();
        let create = CreateTopic {
            name: name.clone(),
            partitions,
            configs: BTreeMap::new(),
            validate_only: false,
            ..Default::default()
        };
        let records = create_topic(&image, &create, policy, *uuid::Uuid::new_v4().as_bytes())
            .map_err(|error| format!("topic {name}: {error}"))?;
        image = apply_all(&image, &records).map_err(|error| format!("topic {name}: {error}"))?;
        topics.push((name.clone(), partitions, missing));
    }
    Ok(Recovered { json: store::to_json(&image), topics })
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::ids::NodeId;

    fn data_dir(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("strata-recover-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn partition(dir: &Path, name: &str) {
        std::fs::create_dir_all(dir.join(name)).unwrap();
        std::fs::write(dir.join(name).join("00000000000000000000.log"), b"").unwrap();
    }

    #[test]
    fn the_topic_table_is_rebuilt_from_the_partition_directories() {
        let dir = data_dir("rebuild");
        partition(&dir, "orders-0");
        partition(&dir, "orders-2");
        partition(&dir, "my-topic-0");
        partition(&dir, "__consumer_offsets-3");
        std::fs::create_dir_all(dir.join("not-a-partition")).unwrap();
        std::fs::create_dir_all(dir.join("empty-0")).unwrap();
        let policy = PlacementPolicy { node: NodeId(0), shard_count: 2 };
        let recovered = recover(&dir, policy, None).unwrap();
        assert_eq!(
            recovered.topics,
            vec![("my-topic".to_string(), 1, vec![]), ("orders".to_string(), 3, vec![1])]
        );
        let (image, _) = store::load(&recovered.json, policy).unwrap();
        assert_eq!(image.topic("orders").map(|t| t.partitions.len()), Some(3));
        assert!(image.topic("__consumer_offsets").is_none(), "startup adds it");
        assert!(refuse_without_metadata(&dir).unwrap_err().contains("recover-metadata"));
        assert!(refuse_without_metadata(&data_dir("fresh")).is_ok());
    }
}
