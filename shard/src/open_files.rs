//! The shard's cache of open segment descriptors: segment files are opened on demand and the
//! least recently used logs' files closed past the shard's limit, so a node's partition count is
//! not capped by its open-files limit (`nofile`).
//!
//! Issue #38: every partition kept its active segment's file open, so the machine's 20,000-file
//! limit capped a node near 19,000 partitions whatever its memory. Now each log registers here
//! (`register`), tells how many segment files it holds open (`LogFiles::set_open`) and when it
//! was last used (`LogFiles::touch`); when the shard's count passes its limit, the logs used
//! least recently close theirs (`CloseFiles::close_files`). A closed file is reopened by the
//! next read or write that needs it (`PartitionLog::segment_file`). An I/O in progress holds its
//! own reference to the file, so closing never cuts it short: the descriptor goes when that
//! I/O is done (the count may pass the limit by those, briefly).
//!
//! Runs on: one shard (thread-local, like the write-buffer and read-ahead budgets).

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Weak;

/// The limit of a shard that was not configured (tests; the broker derives it from `nofile`).
pub const SEGMENT_FILES_OPEN_DEFAULT: usize = 4096;

/// What a log does when the cache closes its files: drop every segment file it holds that no
/// I/O is using; returns how many it dropped.
pub trait CloseFiles {
    fn close_files(&self) -> usize;
}

struct Entry {
    holder: Weak<dyn CloseFiles>,
    open: usize,
    used: u64,
    /// Files the cache closed and the log has not opened again.
    closed: usize,
}

struct Cache {
    limit: usize,
    open: usize,
    clock: u64,
    next_id: u64,
    logs: HashMap<u64, Entry>,
    /// (last use, log id) of the logs holding files, least recently used first.
    by_use: BTreeMap<u64, u64>,
    closed_total: u64,
    reopened_total: u64,
}

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache {
        limit: SEGMENT_FILES_OPEN_DEFAULT,
        open: 0,
        clock: 0,
        next_id: 0,
        logs: HashMap::new(),
        by_use: BTreeMap::new(),
        closed_total: 0,
        reopened_total: 0,
    });
}

/// Sets this shard's limit (once at startup; at least 16).
pub fn configure(limit: usize) {
    CACHE.with(|cache| cache.borrow_mut().limit = limit.max(16));
}

/// A log's registration; dropping it forgets the log (after it closed its files).
pub struct LogFiles {
    id: u64,
}

/// Registers a log whose files `holder` closes on demand.
pub fn register(holder: Weak<dyn CloseFiles>) -> LogFiles {
    CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        let id = cache.next_id;
        cache.next_id += 1;
        cache.logs.insert(id, Entry { holder, open: 0, used: 0, closed: 0 });
        LogFiles { id }
    })
}

impl LogFiles {
    /// The log now holds `open` segment files; it was just used. Closes other logs' files if
    /// the shard is past its limit.
    pub fn set_open(&self, open: usize) {
        let victims = CACHE.with(|cache| {
            let mut cache = cache.borrow_mut();
            let Some(entry) = cache.logs.get(&self.id) else { return Vec::new() };
            let (before, closed) = (entry.open, entry.closed);
            let reopened = open.saturating_sub(before).min(closed);
            cache.open = cache.open.saturating_sub(before) + open;
            cache.reopened_total += reopened as u64;
            let entry = cache.logs.get_mut(&self.id).expect("present");
            entry.open = open;
            entry.closed = closed - reopened;
            touch(&mut cache, self.id, true);
            victims(&mut cache, self.id)
        });
        close(victims);
    }

    /// The log was just used (an append or a read): it is the last to lose its files.
    pub fn touch(&self) {
        CACHE.with(|cache| touch(&mut cache.borrow_mut(), self.id, false));
    }
}

impl Drop for LogFiles {
    fn drop(&mut self) {
        CACHE.with(|cache| {
            let mut cache = cache.borrow_mut();
            if let Some(entry) = cache.logs.remove(&self.id) {
                cache.open = cache.open.saturating_sub(entry.open);
                cache.by_use.remove(&entry.used);
            }
        });
    }
}

/// Makes `id` the most recently used; `recount`: its open count just changed (so its place in
/// `by_use` is redone even if it was already the most recent).
fn touch(cache: &mut Cache, id: u64, recount: bool) {
    let Some(entry) = cache.logs.get_mut(&id) else { return };
    if !recount && entry.used == cache.clock && entry.used != 0 {
        return; // already the most recently used (one busy partition appending)
    }
    cache.clock += 1;
    let now = cache.clock;
    let previous = std::mem::replace(&mut entry.used, now);
    let holds = entry.open > 0;
    cache.by_use.remove(&previous);
    if holds {
        cache.by_use.insert(now, id);
    }
}

/// The least recently used logs to close until the count is back under the limit (sparing
/// `spare`, the log that just opened one).
fn victims(cache: &mut Cache, spare: u64) -> Vec<(u64, Weak<dyn CloseFiles>)> {
    let mut over = cache.open.saturating_sub(cache.limit);
    let mut chosen = Vec::new();
    for (_, id) in cache.by_use.iter() {
        if over == 0 {
            break;
        }
        if *id == spare {
            continue;
        }
        if let Some(entry) = cache.logs.get(id) {
            over = over.saturating_sub(entry.open);
            chosen.push((*id, entry.holder.clone()));
        }
    }
    chosen
}

/// Asks each victim to close its files (outside the cache's borrow: a log's `close_files` does
/// not call back here) and takes them off the count.
fn close(victims: Vec<(u64, Weak<dyn CloseFiles>)>) {
    for (id, holder) in victims {
        let closed = holder.upgrade().map_or(0, |holder| holder.close_files());
        CACHE.with(|cache| {
            let mut cache = cache.borrow_mut();
            cache.closed_total += closed as u64;
            let Some(entry) = cache.logs.get_mut(&id) else { return };
            let closed = closed.min(entry.open);
            entry.open -= closed;
            entry.closed += closed;
            let (open, used) = (entry.open, entry.used);
            cache.open = cache.open.saturating_sub(closed);
            if open == 0 {
                cache.by_use.remove(&used);
            }
        });
    }
}

/// The cache's state, for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub limit: u64,
    pub open: u64,
    /// Segment files closed to stay under the limit, and those opened again since, since start.
    pub closed_total: u64,
    pub reopened_total: u64,
}

pub fn snapshot() -> Snapshot {
    CACHE.with(|cache| {
        let cache = cache.borrow();
        Snapshot {
            limit: cache.limit as u64,
            open: cache.open as u64,
            closed_total: cache.closed_total,
            reopened_total: cache.reopened_total,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    struct Holder(Cell<usize>);

    impl CloseFiles for Holder {
        fn close_files(&self) -> usize {
            self.0.replace(0)
        }
    }

    #[test]
    fn past_the_limit_the_least_recently_used_logs_close_their_files() {
        std::thread::spawn(|| {
            configure(16);
            let holders: Vec<Rc<Holder>> = (0..20).map(|_| Rc::new(Holder(Cell::new(1)))).collect();
            let logs: Vec<LogFiles> = holders
                .iter()
                .map(|holder| register(Rc::downgrade(holder) as Weak<dyn CloseFiles>))
                .collect();
            for log in &logs[..16] {
                log.set_open(1);
            }
            assert_eq!(snapshot().open, 16);
            logs[0].touch(); // used again: not the first to go
            logs[16].set_open(1);
            assert_eq!(snapshot().open, 16, "one closed for the one opened");
            assert_eq!(holders[1].0.get(), 0, "the least recently used closed");
            assert_eq!(holders[0].0.get(), 1, "a log used since kept its file");
            for log in &logs[17..] {
                log.set_open(1);
            }
            assert_eq!(snapshot().open, 16);
            assert_eq!(snapshot().closed_total, 4);
            logs[1].set_open(1); // read again: reopened, and another log's file goes
            assert_eq!(snapshot().reopened_total, 1);
            assert_eq!(snapshot().open, 16);
            drop(logs);
            assert_eq!(snapshot().open, 0);
        })
        .join()
        .unwrap();
    }
}
