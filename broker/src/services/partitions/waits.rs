//! Fetch long polls: a wait, on the owner shard, for an append past an offset (or a deadline).
//!
//! A service of its own so that parked fetches (up to `fetch.max.wait.ms` each, many per
//! consumer) never take the permits appends and reads need (`PartitionService::IN_PROGRESS_MAX`).
//! A wait holds an event listener and a timer, no data.

use super::PartitionService;
use crate::mesh::Service;
use shard::io::Storage;
use std::rc::Rc;
use std::time::Duration;
use wire::ids::{Offset, TopicPartition};

pub struct WaitForAppend {
    pub partition: TopicPartition,
    /// Returns once the high watermark (what readers may see) is past this offset.
    pub offset: Offset,
    pub wait_ms: u64,
    /// A follower's fetch: waits for the log end instead (followers copy past the high
    /// watermark).
    pub log_end: bool,
}

pub struct PartitionWaits<S: Storage> {
    partitions: Rc<PartitionService<S>>,
}

impl<S: Storage> PartitionWaits<S> {
    pub fn new(partitions: Rc<PartitionService<S>>) -> Self {
        PartitionWaits { partitions }
    }

    async fn wait(&self, request: WaitForAppend) {
        let Some(owned) = self.partitions.local(&request.partition) else { return };
        // The high watermark, not the log end: an offline log's readers stop at its durable
        // end, and waking them for records they cannot see would make them poll in a loop.
        let past = || {
            let end = if request.log_end {
                owned.log.log_end_offset()
            } else {
                owned.log.high_watermark()
            };
            end > request.offset.0
        };
        if past() {
            return;
        }
        let listener = owned.appended.listen();
        if past() {
            return;
        }
        futures_lite::future::or(
            async {
                listener.await;
            },
            shard::runtime::sleep(Duration::from_millis(request.wait_ms)),
        )
        .await;
    }
}

impl<S: Storage> Service for PartitionWaits<S> {
    const NAME: &'static str = "partition_waits";
    const IN_PROGRESS_MAX: usize = 65_536;
}

impl crate::mesh::Ask for WaitForAppend {
    type Answer = ();
}

crate::mesh::answers!(PartitionWaits, WaitForAppend, |waits, request| waits.wait(request).await);
