//! A partition's append order: appends take a ticket when they reach the owner shard (before
//! any wait) and append in ticket order, whatever their checks cost. So two pipelined produce
//! requests for one partition append in the order they arrived, and an idempotent producer's
//! in-flight batches keep their sequence order, even when the first one's compressed records
//! are checked on an offload thread and the second's are not.
//! Runs on: the partition's owner shard (`Cell`s, no atomics).

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::rc::Rc;

#[derive(Default)]
pub struct AppendOrder {
    next: Cell<u64>,
    /// The ticket whose turn it is.
    serving: Cell<u64>,
    /// Tickets released before their turn (a refused request), skipped when reached.
    released: RefCell<BTreeSet<u64>>,
    turn: event_listener::Event,
}

/// A place in a partition's append order, released when dropped.
pub struct Ticket {
    order: Rc<AppendOrder>,
    number: u64,
}

impl AppendOrder {
    /// The next place in line (taken without waiting).
    pub fn ticket(self: &Rc<Self>) -> Ticket {
        let number = self.next.get();
        self.next.set(number + 1);
        Ticket { order: self.clone(), number }
    }
}

impl Ticket {
    /// Waits until every earlier ticket was released.
    pub async fn turn(&self) {
        loop {
            if self.order.serving.get() == self.number {
                return;
            }
            let listener = self.order.turn.listen();
            if self.order.serving.get() == self.number {
                return;
            }
            listener.await;
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let order = &self.order;
        if order.serving.get() != self.number {
            order.released.borrow_mut().insert(self.number);
            return;
        }
        let mut serving = self.number + 1;
        let mut released = order.released.borrow_mut();
        while released.remove(&serving) {
            serving += 1;
        }
        order.serving.set(serving);
        order.turn.notify(usize::MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_follow_tickets_and_skip_released_ones() {
        let order = Rc::new(AppendOrder::default());
        let first = order.ticket();
        let second = order.ticket();
        let third = order.ticket();
        assert_eq!(order.serving.get(), 0);
        drop(second); // refused before its turn
        assert_eq!(order.serving.get(), 0);
        drop(first);
        assert_eq!(order.serving.get(), 2, "the released second ticket is skipped");
        drop(third);
        assert_eq!(order.serving.get(), 3);
        assert!(order.released.borrow().is_empty());
    }

    #[test]
    fn a_turn_waits_for_the_earlier_ticket() {
        let order = Rc::new(AppendOrder::default());
        let first = order.ticket();
        let second = order.ticket();
        let mut waiting = Box::pin(second.turn());
        assert!(
            futures_lite::future::block_on(futures_lite::future::poll_once(&mut waiting)).is_none()
        );
        drop(first);
        assert!(
            futures_lite::future::block_on(futures_lite::future::poll_once(&mut waiting)).is_some()
        );
    }
}
