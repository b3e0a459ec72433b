//! The cluster controller (issue #15; the plan is in ARCHITECTURE.md, "Cluster control plane").
//! It will run openraft on its own thread; what exists so far is the Raft log's file format
//! (`log_file`), with its recovery.
//!
//! Runs on: the controller thread, never a shard.

pub mod log_file;
