//! How far ahead the active segment's file is reserved on disk (fallocate with KEEP_SIZE), so
//! appends do not allocate extents one write at a time, and a full disk fails an append before
//! its batch becomes visible.
//!
//! Disk in proportion to data (issue #38): a fixed 8 MiB ahead of every partition that took one
//! record cost 57 GB at 8,000 partitions and filled the disk. A log now reserves in steps that
//! follow its write rate: the first is `PREALLOCATE_STEP_MIN`; a step used up within
//! `PREALLOCATE_GROW_MS` doubles the next one (up to `PREALLOCATE_STEP_MAX`), a step that
//! lasted over four times that halves it. So a partition holds about a quarter to half a second
//! of its own writes reserved ahead, and an idle one at most what was left of its last step
//! (`release_idle` gives that back). Kafka's `preallocate=true` reserves a new segment's whole
//! `segment.bytes` at once, as Kafka does. A sealed segment is trimmed to its length, which
//! frees what was reserved past it.

use super::*;

/// The first reservation of a log, and the smallest step.
pub const PREALLOCATE_STEP_MIN: u64 = 64 << 10;
/// The largest step: a partition written at 1 GB/s reserves 256 MiB (a quarter second) at a time.
pub const PREALLOCATE_STEP_MAX: u64 = 256 << 20;
/// A step used up faster than this doubles the next.
pub const PREALLOCATE_GROW_MS: i64 = 1_000;

/// A log's reservation step, carried across its segments.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Preallocation {
    step: u64,
    /// When the last step was reserved.
    reserved_ms: i64,
}

impl Default for Preallocation {
    fn default() -> Self {
        Self { step: PREALLOCATE_STEP_MIN, reserved_ms: i64::MIN }
    }
}

impl Preallocation {
    /// The step to reserve now that the previous one ran out at `now_ms`.
    pub(crate) fn next_step(&mut self, now_ms: i64) -> u64 {
        let lasted = now_ms.saturating_sub(self.reserved_ms);
        if lasted < PREALLOCATE_GROW_MS {
            self.step = (self.step * 2).min(PREALLOCATE_STEP_MAX);
        } else if lasted > 4 * PREALLOCATE_GROW_MS {
            self.step = (self.step / 2).max(PREALLOCATE_STEP_MIN);
        }
        self.reserved_ms = now_ms;
        self.step
    }

    /// After an idle log gave its reservation back: start small again.
    pub(crate) fn reset(&mut self) {
        *self = Self::default();
    }
}

impl<S: Storage> PartitionLog<S> {
    /// Extends the active segment's reservation when the `upcoming` bytes about to be appended
    /// would pass it (see the module header for how far). Caller holds `write_lock`.
    pub(crate) async fn preallocate_ahead_locked(
        &self,
        file: &Rc<S::File>,
        upcoming: u64,
        now_ms: i64,
    ) -> Result<()> {
        let (target, current) = {
            let mut state = self.state.borrow_mut();
            let config = self.config.borrow();
            let (size, reserved) = {
                let active = state.active();
                (active.size_bytes, active.preallocated_end)
            };
            let needed = align_up(size + upcoming);
            if needed <= reserved {
                return Ok(());
            }
            let segment_end = align_up(config.segment_bytes.max(size + upcoming));
            let target = if config.preallocate {
                segment_end
            } else {
                let step = state.preallocation.next_step(now_ms);
                align_up(size + step.max(upcoming)).min(segment_end).max(needed)
            };
            (target, reserved)
        };
        if target > current {
            file.preallocate(target).await?;
            self.state.borrow_mut().active_mut().preallocated_end = target;
        }
        Ok(())
    }

    /// Bytes reserved past the active segment's logical end (disk held for future appends).
    pub fn preallocated_ahead_bytes(&self) -> u64 {
        let state = self.state.borrow();
        state
            .segments
            .values()
            .next_back()
            .map_or(0, |active| active.preallocated_end.saturating_sub(align_up(active.size_bytes)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_double_while_used_up_quickly_and_halve_when_they_last() {
        let grow = PREALLOCATE_GROW_MS;
        let mut preallocation = Preallocation::default();
        assert_eq!(preallocation.next_step(0), PREALLOCATE_STEP_MIN, "a first step stays small");
        assert_eq!(preallocation.next_step(10), 2 * PREALLOCATE_STEP_MIN);
        assert_eq!(preallocation.next_step(20), 4 * PREALLOCATE_STEP_MIN);
        let mut now = 20;
        for _ in 0..20 {
            now += 10;
            preallocation.next_step(now);
        }
        assert_eq!(preallocation.next_step(now + 10), PREALLOCATE_STEP_MAX, "capped");
        now += 10;
        assert_eq!(preallocation.next_step(now + 2 * grow), PREALLOCATE_STEP_MAX, "kept");
        now += 2 * grow;
        assert_eq!(preallocation.next_step(now + 5 * grow), PREALLOCATE_STEP_MAX / 2, "halved");
        now += 5 * grow;
        preallocation.reset();
        assert_eq!(preallocation.next_step(now + 10), PREALLOCATE_STEP_MIN);
    }
}
