//! `strata`: the broker binary.
//!
//! Today it offers `strata check`, which runs the startup checks every shard needs (io_uring,
//! locked memory, cores, direct I/O on the data directory from each pinned shard). The Kafka
//! listener (`strata serve`) is issue #3; this file grows into the CLI described in DESIGN.md §6.

use clap::{Parser, Subcommand};
use shard::runtime::{self, RuntimeConfig};
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "strata", version, about = "A Kafka-compatible, thread-per-core commit log")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check that this machine can run strata: io_uring, locked memory, cores, and direct I/O on
    /// the data directory from every shard.
    Check {
        /// Data directory to probe.
        #[arg(long, default_value = "./strata-data")]
        data_dir: PathBuf,
        /// Shards to start (default: all cores).
        #[arg(long)]
        cores: Option<usize>,
    },
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Check { data_dir, cores } => check(data_dir, cores),
    };
    if let Err(message) = outcome {
        eprintln!("strata: {message}");
        std::process::exit(1);
    }
}

fn check(data_dir: PathBuf, cores: Option<usize>) -> Result<(), String> {
    let mut config = RuntimeConfig::all_cores();
    if let Some(cores) = cores {
        config.cores = cores;
    }
    let preflight =
        runtime::preflight(config.cores, config.io_memory_bytes).map_err(|e| e.to_string())?;
    for warning in &preflight.warnings {
        tracing::warn!("{warning}");
    }
    tracing::info!(
        cores = config.cores,
        available_cores = preflight.available_cores,
        memlock_limit_bytes = preflight.memlock_limit_bytes,
        cap_ipc_lock = preflight.has_cap_ipc_lock,
        "preflight passed"
    );
    let results = runtime::run_shards(&config, move |context| {
        let data_dir = data_dir.clone();
        async move {
            runtime::open_storage(&data_dir)
                .await
                .map(|_| context.shard_id.0)
                .map_err(|error| format!("shard {}: {error}", context.shard_id.0))
        }
    })
    .map_err(|e| e.to_string())?;
    for result in results {
        let shard = result?;
        tracing::info!(shard, "direct I/O works");
    }
    println!("ok");
    Ok(())
}
