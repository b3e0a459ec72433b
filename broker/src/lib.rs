//! The strata broker: the Kafka listener, the API handlers, the owner-side services on the
//! cross-core mesh, cluster metadata, the admin endpoint, and the operator CLI. The `strata`
//! binary (`main.rs`) is a thin shell over this.
//!
//! Layers, each using only the ones below it (no module imports another in a circle):
//! `server` (startup, lifecycle) → `net` (accept, connection) → `api` (the registry) →
//! `handlers` (one per Kafka API) → `node` (routing by placement) → `services`
//! (partitions, metadata, groups, producer ids, stats) → `mesh` (typed cross-core calls) and
//! `metadata` (images, records, pure apply) → `error`, `stats`, `clock`, `config`, `request_context`, `shutdown`.
//! `peer` (connections to the other brokers' inter-broker listener, with TLS and SASL) serves
//! `services`; `authorization` (the authorizer) reads `metadata`'s ACLs for `node`.
//! `cluster_join` (a cluster node's startup) sits beside `server`; `console` (the web console,
//! served by `admin`) makes Kafka requests through `api` as its user; `controller` (the Raft
//! quorum's thread, issue #15) uses only `metadata` (records, apply, the image's format) and
//! `durable_file` (whole-file replacement with std, off the shards); the metadata service
//! holds a `controller::quorum::ControllerHandle` to propose through.
//! Invariant: only `error::error_code` produces Kafka error codes.

pub mod admin;
pub mod alloc;
pub mod api;
pub mod authorization;
pub mod cli;
pub mod clock;
pub mod cluster_join;
pub mod config;
pub mod console;
pub mod controller;
pub mod durable_file;
pub mod error;
pub mod handlers;
pub mod in_process;
pub mod log_output;
pub mod mesh;
pub mod metadata;
pub mod net;
pub mod node;
pub mod peer;
pub mod request_context;
pub mod routers;
pub mod sasl;
pub mod server;
pub mod services;
pub mod shutdown;
pub mod stats;
