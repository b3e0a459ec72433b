//! Time as the broker's services see it: the system clock in the running broker, a manual one
//! that tests advance, so that session timeouts, rebalance deadlines and offset expiry can be
//! driven step by step without sleeping.
//!
//! `now()` is monotonic (deadlines), `now_ms()` is wall-clock milliseconds since the Unix epoch
//! (record timestamps, commit times, retention). A manual clock starts at the moment it is made
//! and moves only when `advance` is called. Timers (`shard::runtime::sleep`) stay real: the
//! services' periodic ticks run on real time and read this clock to decide.
//! Runs on: one shard (`Rc`, not `Send`).

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

#[derive(Clone, Default)]
pub struct Clock {
    manual: Option<Rc<ManualTime>>,
}

struct ManualTime {
    start: Instant,
    start_ms: i64,
    advanced: Cell<Duration>,
}

impl Clock {
    pub fn system() -> Self {
        Clock { manual: None }
    }

    /// A clock that stands still until `advance` moves it.
    pub fn manual() -> Self {
        let time = ManualTime {
            start: Instant::now(),
            start_ms: shard::runtime::now_ms(),
            advanced: Cell::new(Duration::ZERO),
        };
        Clock { manual: Some(Rc::new(time)) }
    }

    /// Moves a manual clock forward (the system clock cannot be moved).
    pub fn advance(&self, by: Duration) {
        let time = self.manual.as_ref().expect("only a manual clock can be advanced");
        time.advanced.set(time.advanced.get() + by);
    }

    pub fn now(&self) -> Instant {
        match &self.manual {
            None => Instant::now(),
            Some(time) => time.start + time.advanced.get(),
        }
    }

    pub fn now_ms(&self) -> i64 {
        match &self.manual {
            None => shard::runtime::now_ms(),
            Some(time) => time.start_ms + time.advanced.get().as_millis() as i64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_advanced() {
        let clock = Clock::manual();
        let (at, at_ms) = (clock.now(), clock.now_ms());
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!((clock.now(), clock.now_ms()), (at, at_ms));
        clock.advance(Duration::from_millis(1500));
        assert_eq!(clock.now() - at, Duration::from_millis(1500));
        assert_eq!(clock.now_ms() - at_ms, 1500);
        assert!(Clock::system().now_ms() >= at_ms);
    }
}
