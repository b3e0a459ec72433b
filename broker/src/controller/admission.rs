//! The CONTROLLER listener's bounds, as the Kafka listener has its own (`net::budget`,
//! `net::limits`): what a peer can make a node hold, and for how long.
//! - At most `CONNECTIONS_MAX` connections are served; one more is closed as it is accepted.
//! - A connection is *unproven* until it shows it belongs to this cluster: by the login, on a
//!   listener that requires one (`security`), or else by an `Identify` naming one of the
//!   cluster's voters or registered brokers (`network::Peer` says it first on every connection
//!   it opens). On a plaintext listener that is a claim, not authentication: it keeps
//!   strangers from large buffers, and the shared budget bounds what a liar can hold.
//! - An unproven connection's frames are at most `UNPROVEN_FRAME_BYTES_MAX`, taken from a
//!   pool of `UNPROVEN_BUFFERED_BYTES_MAX` without waiting (a frame that does not fit closes
//!   the connection), and it is closed after `UNPROVEN_IDLE_MAX` without a frame.
//! - A proven connection's frames (up to `FRAME_BYTES_MAX`) wait for room in
//!   `BUFFERED_BYTES_MAX`, shared by every connection of the listener.
//! - Once a frame's length is read, its room and its bytes must come within
//!   `FRAME_READ_TIMEOUT`, or the connection is closed.
//!
//! So a node holds at most `BUFFERED_BYTES_MAX + UNPROVEN_BUFFERED_BYTES_MAX` bytes of
//! controller frames being read, whatever its peers send.
//! Runs on: the controller thread (tokio).

use super::protocol::{self, Request, FRAME_BYTES_MAX};
use std::io;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Connections the listener serves at once: a voter has one from each other voter and a few
/// from each broker.
pub const CONNECTIONS_MAX: usize = 256;
/// Bytes of frames being read over every proven connection together.
pub const BUFFERED_BYTES_MAX: usize = 128 << 20;
/// The largest frame of a connection that has not shown it belongs to the cluster (logins,
/// hellos, heartbeats and small proposals fit).
pub const UNPROVEN_FRAME_BYTES_MAX: usize = 64 << 10;
/// Bytes of frames being read over every unproven connection together.
pub const UNPROVEN_BUFFERED_BYTES_MAX: usize = 4 << 20;
/// How long the rest of a frame may take once its length is read.
pub const FRAME_READ_TIMEOUT: Duration = Duration::from_secs(15);
/// How long an unproven connection may stay without sending a frame.
pub const UNPROVEN_IDLE_MAX: Duration = Duration::from_secs(30);

const _: () = assert!(FRAME_BYTES_MAX <= BUFFERED_BYTES_MAX);
const _: () = assert!(UNPROVEN_FRAME_BYTES_MAX <= UNPROVEN_BUFFERED_BYTES_MAX);
const _: () = assert!(BUFFERED_BYTES_MAX <= u32::MAX as usize);

/// The listener's shared bounds; cloned into each connection's task.
#[derive(Clone)]
pub struct Admission {
    connections: Arc<Semaphore>,
    buffered: Arc<Semaphore>,
    unproven_buffered: Arc<Semaphore>,
    frame_read_timeout: Duration,
    unproven_idle_max: Duration,
}

impl Default for Admission {
    fn default() -> Self {
        Admission::with_timeouts(FRAME_READ_TIMEOUT, UNPROVEN_IDLE_MAX)
    }
}

/// One served connection's slot, given back when dropped.
pub struct ConnectionSlot(#[allow(dead_code)] OwnedSemaphorePermit);

impl Admission {
    /// The listener's limits with these deadlines (shorter ones in tests).
    fn with_timeouts(frame_read_timeout: Duration, unproven_idle_max: Duration) -> Self {
        Admission {
            connections: Arc::new(Semaphore::new(CONNECTIONS_MAX)),
            buffered: Arc::new(Semaphore::new(BUFFERED_BYTES_MAX)),
            unproven_buffered: Arc::new(Semaphore::new(UNPROVEN_BUFFERED_BYTES_MAX)),
            frame_read_timeout,
            unproven_idle_max,
        }
    }

    /// A slot for a newly accepted connection, or `None` when `CONNECTIONS_MAX` are served.
    pub fn connection(&self) -> Option<ConnectionSlot> {
        self.connections.clone().try_acquire_owned().ok().map(ConnectionSlot)
    }

    /// Reads a connection's next request within its bounds (see the module header);
    /// `Ok(None)` at a clean end of stream, an error (to log, then close) otherwise.
    pub async fn read_request<R>(&self, reader: &mut R, proven: bool) -> io::Result<Option<Request>>
    where
        R: tokio::io::AsyncRead + Unpin,
    {
        let length = if proven {
            protocol::read_length(reader, FRAME_BYTES_MAX).await?
        } else {
            let waiting = protocol::read_length(reader, UNPROVEN_FRAME_BYTES_MAX);
            tokio::time::timeout(self.unproven_idle_max, waiting).await.map_err(|_| {
                timed_out(format!(
                    "no request in {} ms from a peer that has not identified itself",
                    self.unproven_idle_max.as_millis()
                ))
            })??
        };
        let Some(length) = length else { return Ok(None) };
        let reading = async {
            // The length is checked against a limit below `u32::MAX` above.
            let permits = u32::try_from(length).unwrap_or(u32::MAX);
            let _room = if proven {
                self.buffered.acquire_many(permits).await.map_err(io::Error::other)?
            } else {
                self.unproven_buffered.try_acquire_many(permits).map_err(|_| {
                    io::Error::other(format!(
                        "unproven peers hold the {UNPROVEN_BUFFERED_BYTES_MAX} bytes they may"
                    ))
                })?
            };
            protocol::read_payload::<Request, _>(reader, length).await
        };
        match tokio::time::timeout(self.frame_read_timeout, reading).await {
            Ok(request) => request.map(Some),
            Err(_) => Err(timed_out(format!(
                "a {length} byte frame not read within {} ms",
                self.frame_read_timeout.as_millis()
            ))),
        }
    }
}

fn timed_out(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    }

    /// The listener's limits with deadlines of 200 ms.
    fn admission() -> Admission {
        Admission::with_timeouts(Duration::from_millis(200), Duration::from_millis(200))
    }

    #[test]
    fn an_unproven_peer_gets_no_frame_over_its_limit_and_nothing_is_held_for_it() {
        runtime().block_on(async {
            let admission = admission();
            let (mut client, mut server) = tokio::io::duplex(1 << 16);
            let declared = (60u32 << 20).to_le_bytes();
            client.write_all(&declared).await.unwrap();
            let error = admission.read_request(&mut server, false).await.unwrap_err();
            assert!(error.to_string().contains("over the 65536 byte limit"), "{error}");
            assert_eq!(
                admission.unproven_buffered.available_permits(),
                UNPROVEN_BUFFERED_BYTES_MAX
            );
        });
    }

    #[test]
    fn a_frame_that_stalls_is_dropped_at_the_deadline_and_its_room_given_back() {
        runtime().block_on(async {
            let admission = admission();
            let (mut client, mut server) = tokio::io::duplex(1 << 16);
            client.write_all(&(60u32 << 20).to_le_bytes()).await.unwrap();
            client.write_all(&[b'x'; 1000]).await.unwrap();
            // The stalled frame holds its room while it is read...
            let reading = admission.read_request(&mut server, true);
            let error = reading.await.unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::TimedOut, "{error}");
            // ...and gives it back when the deadline drops it.
            assert_eq!(admission.buffered.available_permits(), BUFFERED_BYTES_MAX);
        });
    }

    #[test]
    fn frames_beyond_the_shared_budget_wait_for_room() {
        runtime().block_on(async {
            let admission = admission();
            let mut streams = Vec::new();
            let mut reads = tokio::task::JoinSet::new();
            for _ in 0..3 {
                let (mut client, mut server) = tokio::io::duplex(1 << 16);
                client.write_all(&(60u32 << 20).to_le_bytes()).await.unwrap();
                streams.push(client);
                let admission = admission.clone();
                reads.spawn(async move { admission.read_request(&mut server, true).await });
            }
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(10)).await;
            // Two 60 MiB frames fit in the 128 MiB budget; the third waits for room (holding
            // the rest of it: tokio's semaphore hands permits to the first waiter as they
            // come), and none of them is done.
            assert_eq!(admission.buffered.available_permits(), 0);
            assert_eq!(reads.len(), 3);
            assert!(reads.try_join_next().is_none());
            while let Some(read) = reads.join_next().await {
                assert!(read.unwrap().is_err());
            }
            assert_eq!(admission.buffered.available_permits(), BUFFERED_BYTES_MAX);
        });
    }

    #[test]
    fn unproven_connections_that_stay_silent_are_closed() {
        runtime().block_on(async {
            let admission = admission();
            let (_client, mut server) = tokio::io::duplex(1 << 16);
            let error = admission.read_request(&mut server, false).await.unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::TimedOut, "{error}");
        });
    }

    #[test]
    fn connections_over_the_cap_get_no_slot_until_one_closes() {
        let admission = admission();
        let slots: Vec<ConnectionSlot> =
            (0..CONNECTIONS_MAX).map(|_| admission.connection().unwrap()).collect();
        assert!(admission.connection().is_none());
        drop(slots);
        assert!(admission.connection().is_some());
    }
}
