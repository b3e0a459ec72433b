//! The process-wide shutdown flags, in two steps: the signal thread sets `requested` on the
//! first SIGTERM/SIGINT; shard 0 then runs the controlled shutdown (a cluster broker has the
//! controller move its leaderships away, bounded; a single node has nothing to move) and sets
//! `stopping`, which every shard's accept loop and every connection between requests poll
//! (not a hot path). Until then the broker keeps serving, as Kafka's does while its
//! controlled shutdown runs. Two of the cross-shard atomics (with the drain counter in
//! `server`).

use std::sync::atomic::{AtomicBool, Ordering};

static SHUTDOWN: AtomicBool = AtomicBool::new(false);
static STOPPING: AtomicBool = AtomicBool::new(false);
/// How often shards look at the flags.
pub const SHUTDOWN_POLL_MS: u64 = 50;

/// Records that a shutdown signal arrived; returns whether one had already.
pub fn request() -> bool {
    SHUTDOWN.swap(true, Ordering::SeqCst)
}

/// Whether a shutdown signal arrived (startup gives up; shard 0 begins the controlled
/// shutdown).
pub fn requested() -> bool {
    SHUTDOWN.load(Ordering::SeqCst)
}

/// The controlled shutdown is over: shards stop accepting and connections stop reading.
pub fn begin_stopping() {
    STOPPING.store(true, Ordering::SeqCst);
}

/// Whether the shards are stopping (connections answer what they read and take no more).
pub fn stopping() -> bool {
    STOPPING.load(Ordering::SeqCst)
}

/// Blocks SIGTERM and SIGINT in the calling thread (threads it spawns after inherit the mask)
/// and returns the set, for `sigwait`/`sigtimedwait` to take them. Child processes started
/// with `std::process::Command` get the default mask back.
pub fn block_stop_signals() -> Result<libc::sigset_t, String> {
    // SAFETY: signal-set manipulation on a local value, then pthread_sigmask for this thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return Err("could not block SIGTERM/SIGINT".into());
        }
        Ok(set)
    }
}
