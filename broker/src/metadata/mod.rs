//! Cluster metadata: which topics exist, where each partition is placed, and their configs.
//!
//! Owns: the immutable `MetadataImage` every shard reads (`image`), the records that change it
//! (`records`, modelled on KIP-631's metadata records), the pure function that applies one
//! record to an image (`apply`), the decisions that turn an admin request into records after
//! validating it (`decide`), leader elections (`elect`: fencing, unfencing, preferred and
//! unclean elections), partition placement (`placement`), replica reassignment (`reassign`),
//! SCRAM credentials (`scram`), client quotas (`quotas`), ACLs (`acl` for the bindings, `acls` for the changes),
//! the internal topics
//! (`internal`), topic-config rules (`topic_config`), the image's file
//! `strata-metadata.json` (`store`), the image a node starts from (`startup`) and the data
//! directory's identity file `meta.properties` (`meta_properties`).
//! Invariants: an image is never mutated once published; a change is `decide` (validate, emit
//! records) then `apply` (pure, no I/O) then persist then publish, in that order, so the
//! controller's Raft log can later carry the same records and every broker apply them with the
//! same function. Only the metadata service on shard 0 decides and persists (single node).
//! Runs on: any shard (images are shared read-only per shard as `Rc<MetadataImage>`).

pub mod acl;
pub mod acls;
pub mod apply;
pub mod broker_config;
pub mod client_quota;
pub mod decide;
pub mod elect;
pub mod file_budget;
pub mod group_config;
pub mod image;
pub mod internal;
pub mod meta_properties;
pub mod placement;
pub mod quotas;
pub mod reassign;
pub mod record_codec;
pub mod records;
pub mod recover;
pub mod scram;
pub mod startup;
pub mod store;
pub mod topic_config;

pub use apply::{apply, apply_all, ApplyError};
pub use image::{MetadataImage, TopicImage};
pub use placement::{Placement, PlacementPolicy};
pub use records::MetadataRecord;
pub use startup::startup_image;
pub use topic_config::{
    config_value, log_config, topic_config, validate_topic_name, TOPIC_CONFIGS,
};
