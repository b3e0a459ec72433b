//! Giving back what idle partitions hold: their write buffers (to the shard's write-buffer
//! budget, `shard::write_budget`) and the disk reserved ahead of their active segment
//! (`shard::partition_log::preallocation`).
//!
//! A task per shard wakes every `RELEASE_INTERVAL_MS`, and at once when an append starts
//! waiting for the budget. Partitions with no append for `IDLE_AFTER_MS` give everything back;
//! under pressure, every partition first drops the writes the disk has finished
//! (`PartitionLog::reap_writes`: a write's buffer goes back when it is polled, and a partition
//! whose next append waits for the budget would not poll its own), then partitions with no
//! append for `PRESSED_IDLE_AFTER_MS` give their tails back, least recently written
//! first, until the budget is under three quarters full. Busy partitions keep their buffers:
//! releasing them was measured to cost more than waiting (100 partitions, 128 MiB per shard:
//! 581 MB/s releasing the least recently written under pressure, against 1,005 MB/s with
//! room for all; their next chunks restart small), so appends wait for writes in flight
//! instead.

use super::PartitionService;
use shard::io::Storage;
use std::rc::Rc;
use std::time::Duration;

/// How often idle partitions are looked for.
pub const RELEASE_INTERVAL_MS: u64 = 500;
/// A partition with no append for this long is idle.
pub const IDLE_AFTER_MS: i64 = 1_000;
/// Under pressure, a partition with no append for this long gives its buffer back.
pub const PRESSED_IDLE_AFTER_MS: i64 = 100;
/// The pause between two passes while the budget stays under pressure (its holders may all be
/// writes in flight, which give back on their own).
const PRESSURE_PASS_PAUSE_MS: u64 = 2;

impl<S: Storage> PartitionService<S> {
    /// Releases idle partitions' buffers and reservations, forever (spawned once per shard).
    pub async fn release_idle_forever(self: Rc<Self>) {
        loop {
            let interval = shard::runtime::sleep(Duration::from_millis(RELEASE_INTERVAL_MS));
            futures_lite::future::or(shard::write_budget::pressed(), interval).await;
            let pressed = self.release_idle().await;
            if pressed {
                shard::runtime::sleep(Duration::from_millis(PRESSURE_PASS_PAUSE_MS)).await;
            }
        }
    }

    /// Disk reserved ahead of this shard's active segments, bytes.
    pub fn preallocated_bytes(&self) -> u64 {
        let partitions = self.partitions.borrow();
        partitions.values().map(|partition| partition.log.preallocated_ahead_bytes()).sum()
    }

    /// One pass; whether the budget was under pressure.
    pub async fn release_idle(&self) -> bool {
        let now = self.clock.now_ms();
        let pressed = shard::write_budget::under_pressure();
        if pressed {
            // First what costs nothing: the buffers of writes the disk has finished.
            let partitions: Vec<_> = self.partitions.borrow().values().cloned().collect();
            for partition in partitions {
                partition.log.reap_writes().await;
            }
        }
        let mut holders: Vec<_> = self
            .partitions
            .borrow()
            .values()
            .filter(|partition| partition.log.holds_idle_resources())
            .map(|partition| (partition.log.last_append_ms(), partition.clone()))
            .collect();
        holders.sort_by_key(|(last_append_ms, _)| *last_append_ms);
        for (last_append_ms, partition) in holders {
            let quiet_for = now - last_append_ms;
            let idle = quiet_for >= IDLE_AFTER_MS
                || (pressed
                    && quiet_for >= PRESSED_IDLE_AFTER_MS
                    && shard::write_budget::above_low_water());
            if !idle {
                break;
            }
            if let Err(error) = partition.log.release_idle().await {
                let dir = partition.log.dir().display().to_string();
                tracing::error!(%error, %dir, "writing an idle partition's tail out failed");
            }
        }
        pressed
    }
}
