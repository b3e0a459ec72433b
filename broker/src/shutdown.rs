//! The process-wide shutdown flag: set once by the signal thread on the first SIGTERM/SIGINT,
//! polled by every shard's accept loop and by connections between requests (not a hot path).
//! One of the two cross-shard atomics (with the drain counter in `server`).

use std::sync::atomic::{AtomicBool, Ordering};

static SHUTDOWN: AtomicBool = AtomicBool::new(false);
/// How often shards look at the flag.
pub const SHUTDOWN_POLL_MS: u64 = 50;

/// Asks every shard to stop; returns whether a shutdown had already been asked for.
pub fn request() -> bool {
    SHUTDOWN.swap(true, Ordering::SeqCst)
}

/// Whether a shutdown signal arrived (connections stop reading new requests).
pub fn requested() -> bool {
    SHUTDOWN.load(Ordering::SeqCst)
}
