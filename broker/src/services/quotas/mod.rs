//! The quota service: client byte-rate quotas (KIP-13, KIP-55), produce and fetch, and
//! request-time quotas (KIP-124, `request_percentage`: each request's handler time, the sum of
//! its polls on this shard, `timed`), enforced on every shard, with
//! throttling as KIP-219 has it (the response carries `throttle_time_ms` and the connection is
//! not read for that long).
//!
//! Owns: per shard, a token bucket per quota sensor (the quota's key and the (user, client id)
//! tags `metadata::quotas::resolve` names), and this shard's share of each quota. A quota is
//! the broker's, and a client's connections may sit on several shards: each shard refills its
//! bucket at `quota × its share`, the share being its recent demand over the demand of every
//! shard (shards tell each other their demand every `GOSSIP_INTERVAL` over the mesh; a shard
//! that hears of no other demand has the whole quota). No lock and no shared counter on the
//! request path: a request touches only its own shard's bucket.
//! Invariant: a sensor's debt (negative tokens) is what throttles: the throttle time is the
//! time the share takes to pay it back, so a client held to its throttle times sends at the
//! quota on average.
//! Runs on: every shard (`record`, the gossip task).
//! References: Kafka `ClientQuotaManager` (precedence, tags), KIP-219 (throttle, then mute).

use crate::mesh::{Mesh, Service};
use crate::metadata::quotas::{resolve, REQUEST_PERCENTAGE};
use crate::metadata::MetadataImage;
use futures_util::future::LocalBoxFuture;
use shard::runtime::ShardId;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// How often shards tell each other their demand per sensor.
pub const GOSSIP_INTERVAL: Duration = Duration::from_millis(200);
/// Another shard's demand counts this long after it was heard.
const DEMAND_TTL: Duration = Duration::from_secs(2);
/// A bucket holds at most this much of its refill (the burst a quiet client may send at once).
const BURST: Duration = Duration::from_secs(1);
/// The longest throttle answered (Kafka caps it at the quota window, 11 s by default).
const THROTTLE_MAX_MS: i32 = 10_000;

/// What a quota is tracked under: its key, and the user and client id when its entity names
/// them.
pub type Sensor = (&'static str, Option<String>, Option<String>);

struct Bucket {
    tokens: f64,
    refilled: Instant,
    /// Bytes recorded since the last gossip, and the demand (bytes/s) measured then.
    window_bytes: f64,
    window_start: Instant,
    demand: f64,
}

/// Other shards' demand for one sensor: bytes/s, and when it was heard.
type Heard = HashMap<ShardId, (f64, Instant)>;

pub struct QuotaService {
    mesh: Rc<Mesh>,
    buckets: RefCell<HashMap<Sensor, Bucket>>,
    /// Other shards' demand per sensor, with when it was heard.
    remote: RefCell<HashMap<Sensor, Heard>>,
}

pub enum QuotaRequest {
    /// Another shard's demand (bytes/s) per sensor.
    Demand(ShardId, Vec<(Sensor, f64)>),
}

impl QuotaService {
    pub fn new(mesh: Rc<Mesh>) -> Self {
        QuotaService { mesh, buckets: RefCell::default(), remote: RefCell::default() }
    }

    /// Records `bytes` produced or fetched (`key`: `producer_byte_rate` or
    /// `consumer_byte_rate`) by `user` with `client_id`, and returns the throttle time in
    /// milliseconds (0: within the quota, or no quota applies).
    pub fn record_bytes(
        &self,
        image: &MetadataImage,
        key: &'static str,
        user: &str,
        client_id: &str,
        bytes: usize,
    ) -> i32 {
        let Some((quota, (user_tag, client_tag))) = resolve(image, user, client_id, key) else {
            return 0;
        };
        self.record((key, user_tag, client_tag), quota, bytes as f64, Instant::now())
    }

    /// Records `spent`, the time a request's handler ran on this shard (the sum of its
    /// polls), against the `request_percentage` quota of `user` with `client_id` (KIP-124:
    /// percent of a core's time per second, tracked in microseconds), and returns the
    /// throttle time in milliseconds (0: within the quota, or none applies).
    pub fn record_time(
        &self,
        image: &MetadataImage,
        user: &str,
        client_id: &str,
        spent: Duration,
    ) -> i32 {
        let Some((percentage, (user_tag, client_tag))) =
            resolve(image, user, client_id, REQUEST_PERCENTAGE)
        else {
            return 0;
        };
        let micros_per_second = percentage / 100.0 * 1e6;
        let spent = spent.as_secs_f64() * 1e6;
        self.record(
            (REQUEST_PERCENTAGE, user_tag, client_tag),
            micros_per_second,
            spent,
            Instant::now(),
        )
    }

    fn share(&self, sensor: &Sensor, local: f64, now: Instant) -> f64 {
        let remote = self.remote.borrow();
        let others: f64 = remote.get(sensor).map_or(0.0, |shards| {
            shards
                .values()
                .filter(|(_, heard)| now.duration_since(*heard) < DEMAND_TTL)
                .map(|(demand, _)| *demand)
                .sum()
        });
        if others <= 0.0 {
            return 1.0;
        }
        // A shard with traffic and no measured demand yet gets an even part until it has one.
        let local =
            if local > 0.0 { local } else { others / self.mesh.shard_count().max(1) as f64 };
        local / (local + others)
    }

    fn record(&self, sensor: Sensor, quota: f64, bytes: f64, now: Instant) -> i32 {
        let local_demand = self.buckets.borrow().get(&sensor).map_or(0.0, |bucket| bucket.demand);
        let rate = quota * self.share(&sensor, local_demand, now);
        let mut buckets = self.buckets.borrow_mut();
        let bucket = buckets.entry(sensor).or_insert_with(|| Bucket {
            tokens: rate * BURST.as_secs_f64(),
            refilled: now,
            window_bytes: 0.0,
            window_start: now,
            demand: 0.0,
        });
        let elapsed = now.duration_since(bucket.refilled).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * rate).min(rate * BURST.as_secs_f64());
        bucket.refilled = now;
        bucket.tokens -= bytes;
        bucket.window_bytes += bytes;
        if bucket.tokens >= 0.0 || rate <= 0.0 {
            return 0;
        }
        let throttle_ms = (-bucket.tokens / rate * 1000.0).ceil();
        throttle_ms.min(f64::from(THROTTLE_MAX_MS)) as i32
    }

    /// This shard's demand per sensor since the last call (bytes/s), forgetting sensors idle
    /// for a while.
    fn measure(&self, now: Instant) -> Vec<(Sensor, f64)> {
        let mut buckets = self.buckets.borrow_mut();
        let mut demands = Vec::new();
        buckets.retain(|sensor, bucket| {
            let elapsed = now.duration_since(bucket.window_start).as_secs_f64().max(1e-3);
            let rate = bucket.window_bytes / elapsed;
            bucket.demand = 0.5 * bucket.demand + 0.5 * rate;
            bucket.window_bytes = 0.0;
            bucket.window_start = now;
            if bucket.demand > 1.0 {
                demands.push((sensor.clone(), bucket.demand));
            }
            // A sensor quiet for long enough starts again with a full bucket.
            bucket.demand > 1.0 || now.duration_since(bucket.refilled) < DEMAND_TTL
        });
        demands
    }

    /// Every shard, for the life of the node: measures this shard's demand per sensor every
    /// `GOSSIP_INTERVAL`, forgetting idle sensors (so client ids that come and go do not
    /// accumulate), and tells the other shards, if any.
    pub async fn gossip(self: Rc<Self>) {
        loop {
            shard::runtime::sleep(GOSSIP_INTERVAL).await;
            if crate::shutdown::stopping() {
                return;
            }
            let demands = self.measure(Instant::now());
            if demands.is_empty() || self.mesh.shard_count() < 2 {
                continue;
            }
            let me = self.mesh.id();
            for target in self.mesh.shards().filter(|shard| *shard != me) {
                let request = QuotaRequest::Demand(me, demands.clone());
                if let Err(error) = self.mesh.call::<Self, _>(target, request).await {
                    tracing::debug!(%error, "telling a shard this shard's quota demand");
                }
            }
        }
    }

    fn heard(&self, from: ShardId, demands: Vec<(Sensor, f64)>) {
        let now = Instant::now();
        let mut remote = self.remote.borrow_mut();
        for (sensor, demand) in demands {
            remote.entry(sensor).or_default().insert(from, (demand, now));
        }
        remote.retain(|_, shards| {
            shards.retain(|_, (_, heard)| now.duration_since(*heard) < DEMAND_TTL);
            !shards.is_empty()
        });
    }
}

impl Service for QuotaService {
    const NAME: &'static str = "quotas";
    const IN_PROGRESS_MAX: usize = 64;
}

impl crate::mesh::Ask for QuotaRequest {
    type Answer = ();
}

impl crate::mesh::Answers<QuotaRequest> for QuotaService {
    fn answer(self: Rc<Self>, request: QuotaRequest) -> LocalBoxFuture<'static, ()> {
        Box::pin(async move {
            match request {
                QuotaRequest::Demand(from, demands) => self.heard(from, demands),
            }
        })
    }
}

/// Runs `future` and measures the time spent polling it (its handler's own time on this
/// shard: waits for the disk, the mesh or other brokers are not counted, as Kafka counts the
/// time on its request threads, not in purgatory).
pub async fn timed<F: std::future::Future>(future: F) -> (F::Output, Duration) {
    let mut future = std::pin::pin!(future);
    let mut spent = Duration::ZERO;
    let output = std::future::poll_fn(|cx| {
        let started = Instant::now();
        let poll = future.as_mut().poll(cx);
        spent += started.elapsed();
        poll
    })
    .await;
    (output, spent)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service() -> QuotaService {
        QuotaService::new(Rc::new(Mesh::single()))
    }

    fn sensor() -> Sensor {
        (crate::metadata::quotas::PRODUCER_BYTE_RATE, None, Some("app".into()))
    }

    #[test]
    fn a_client_over_its_quota_is_throttled_for_the_time_its_debt_takes() {
        let quotas = service();
        let start = Instant::now();
        // A full bucket (one second of quota) passes unthrottled.
        assert_eq!(quotas.record(sensor(), 1000.0, 1000.0, start), 0);
        // 500 bytes more at once: half a second of debt.
        assert_eq!(quotas.record(sensor(), 1000.0, 500.0, start), 500);
        // Sending at the quota after paying the debt back is not throttled.
        let later = start + Duration::from_millis(600);
        assert_eq!(quotas.record(sensor(), 1000.0, 100.0, later), 0);
    }

    #[test]
    fn idle_sensors_are_forgotten() {
        let quotas = service();
        let start = Instant::now();
        quotas.record(sensor(), 1000.0, 10.0, start);
        assert_eq!(quotas.measure(start + GOSSIP_INTERVAL).len(), 1, "10 B in 200 ms: 25 B/s");
        let later = start + DEMAND_TTL * 4;
        for step in 1..=20 {
            quotas.measure(later + GOSSIP_INTERVAL * step);
        }
        assert!(quotas.buckets.borrow().is_empty(), "an idle sensor is kept");
    }

    #[test]
    fn a_shard_refills_at_its_share_of_the_demand_other_shards_report() {
        let quotas = service();
        let start = Instant::now();
        assert_eq!(quotas.share(&sensor(), 0.0, start), 1.0, "alone: the whole quota");
        quotas.heard(ShardId(1), vec![(sensor(), 3000.0)]);
        let share = quotas.share(&sensor(), 1000.0, start);
        assert!((share - 0.25).abs() < 1e-9, "{share}");
        let stale = start + DEMAND_TTL + Duration::from_millis(1);
        assert_eq!(quotas.share(&sensor(), 1000.0, stale), 1.0, "an old report is forgotten");
    }
}
