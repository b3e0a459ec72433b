//! The cluster controller (issue #15; the plan is in ARCHITECTURE.md, "Cluster control plane").
//! openraft runs it on its own thread: the Raft log's file format (`log_file`) with its
//! recovery, openraft's storage over it (`log_store`: the log and the vote; `state_machine`:
//! the metadata image and its snapshots), the type configuration (`types`), the controller
//! protocol and openraft's network over it (`protocol`, `network`), the listener's bounds
//! (`admission`), committing from any node
//! (`proposer`), heartbeats, fencing and controlled shutdown (`liveness`), the quorum's state
//! (`status`), and the thread itself (`quorum`).
//!
//! Runs on: the controller thread, never a shard.

pub mod admission;
pub mod liveness;
pub mod log_file;
pub mod log_store;
pub mod network;
pub mod proposer;
pub mod protocol;
pub mod quorum;
pub mod security;
pub mod state_machine;
pub mod status;
pub mod types;

#[cfg(test)]
mod quorum_tests;
#[cfg(test)]
mod storage_suite;
