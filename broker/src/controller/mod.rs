//! The cluster controller (issue #15; the plan is in ARCHITECTURE.md, "Cluster control plane").
//! openraft runs it on its own thread. Built so far: the Raft log's file format (`log_file`)
//! with its recovery, openraft's storage over it (`log_store`: the log and the vote;
//! `state_machine`: the metadata image and its snapshots) and the type configuration
//! (`types`).
//!
//! Runs on: the controller thread, never a shard.

pub mod liveness;
pub mod log_file;
pub mod log_store;
pub mod network;
pub mod proposer;
pub mod protocol;
pub mod quorum;
pub mod state_machine;
pub mod types;

#[cfg(test)]
mod quorum_tests;
#[cfg(test)]
mod storage_suite;
