//! `strata recover-metadata`: writes a `strata-metadata.json` rebuilt from the partition
//! directories (`metadata::recover`) when the file was lost. Refuses when the file exists or a
//! broker holds the data directory. The file is written as the broker writes it: a temporary
//! file, fsync, rename, directory fsync.

use crate::config::BrokerConfig;
use crate::metadata::{recover, store, PlacementPolicy};
use wire::ids::NodeId;

pub fn run(config: &BrokerConfig) -> Result<(), String> {
    let data_dir = &config.data_dir;
    let _lock = crate::server::lock_data_dir(data_dir)?;
    let path = data_dir.join(store::METADATA_FILE);
    if path.exists() {
        return Err(format!(
            "{} exists: nothing to recover (move it away first to rebuild it)",
            path.display()
        ));
    }
    let policy = PlacementPolicy { node: NodeId(config.node_id), shard_count: config.cores };
    // The directory keeps its cluster: its meta.properties names it.
    let identity = crate::metadata::meta_properties::read(data_dir)?;
    let cluster_id = identity.as_ref().map(|meta| meta.cluster_id.as_str());
    let recovered = recover::recover(data_dir, policy, cluster_id)?;
    if recovered.topics.is_empty() {
        return Err(format!("{} holds no partition directories to recover", data_dir.display()));
    }
    crate::durable_file::write(&path, &recovered.json)
        .map_err(|error| format!("{}: {error}", path.display()))?;
    println!("wrote {} with {} topics:", path.display(), recovered.topics.len());
    for (topic, partitions, missing) in &recovered.topics {
        if missing.is_empty() {
            println!("  {topic}: {partitions} partitions");
        } else {
            println!("  {topic}: {partitions} partitions ({missing:?} had no directory: empty)");
        }
    }
    let cluster = match cluster_id {
        Some(id) => format!("the cluster id is kept from meta.properties ({id})"),
        None => "the cluster id is new".to_string(),
    };
    println!(
        "topic configs are Kafka's defaults now (set overrides again with `strata topic \
         alter-config`); {cluster}; __consumer_offsets is recreated at start"
    );
    Ok(())
}
