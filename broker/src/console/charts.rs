//! The console's live charts: every `console.chart.interval.ms` this node's shards' counters
//! and latency histograms are merged, and what happened since the previous sample kept as one
//! point (requests per second per API, p50/p99/p999 of that interval's latencies per API,
//! bytes and messages per second, in total and for the busiest topics), an hour of them.
//! Percentiles are of the interval (the cumulative histogram minus the previous one), so a
//! burst shows when it happens, not diluted by everything since start.
//! Access: the per-API series and totals need DESCRIBE on the cluster; topic series are
//! shown for the topics the user may DESCRIBE.

use super::client::Caller;
use super::http::Request;
use super::{ConsoleError, ConsoleResult};
use crate::authorization::{AclOperation, Resource};
use crate::node::Node;
use crate::stats::Counters;
use hdrhistogram::Histogram;
use kafka_protocol::messages::ApiKey;
use serde_json::{json, Map, Value};
use shard::io::Storage;
use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Samples kept: an hour at the default interval.
pub const SAMPLES_MAX: usize = 720;
/// Topics with a series of their own in one sample (the busiest by bytes in and out).
pub const TOPICS_PER_SAMPLE_MAX: usize = 20;

/// The cumulative figures a sample is the difference of.
#[derive(Default, Clone)]
struct Totals {
    at_ms: i64,
    requests: BTreeMap<i16, u64>,
    latency: BTreeMap<i16, Histogram<u64>>,
    bytes_in: u64,
    bytes_out: u64,
    topics: BTreeMap<String, [u64; 4]>,
}

impl Totals {
    fn of(at_ms: i64, shards: &[Box<Counters>]) -> Totals {
        let mut totals = Totals { at_ms, ..Totals::default() };
        for counters in shards {
            for (api, count) in &counters.requests_by_api {
                *totals.requests.entry(*api).or_default() += count;
            }
            for (api, histogram) in &counters.request_latency_us {
                match totals.latency.get_mut(api) {
                    Some(merged) => {
                        let _ = merged.add(histogram);
                    }
                    None => {
                        totals.latency.insert(*api, histogram.clone());
                    }
                }
            }
            totals.bytes_in += counters.bytes_in;
            totals.bytes_out += counters.bytes_out;
            for (topic, traffic) in &counters.topic_traffic {
                let sum = totals.topics.entry(topic.clone()).or_default();
                for (total, value) in sum.iter_mut().zip(traffic) {
                    *total += value;
                }
            }
        }
        totals
    }
}

pub struct Charts {
    interval: Duration,
    previous: RefCell<Option<Totals>>,
    samples: RefCell<VecDeque<Value>>,
}

fn per_second(now: u64, before: u64, seconds: f64) -> f64 {
    now.saturating_sub(before) as f64 / seconds
}

/// One sample: the difference of two totals.
fn sample(now: &Totals, before: &Totals) -> Value {
    let seconds = ((now.at_ms - before.at_ms).max(1)) as f64 / 1000.0;
    let mut requests = Map::new();
    let mut latency = Map::new();
    for (api, count) in &now.requests {
        let name = crate::api::name(*api).map_or_else(|| api.to_string(), str::to_string);
        let rate = per_second(*count, before.requests.get(api).copied().unwrap_or(0), seconds);
        requests.insert(name.clone(), json!(rate));
        let Some(histogram) = now.latency.get(api) else { continue };
        let mut interval = histogram.clone();
        if let Some(earlier) = before.latency.get(api) {
            if interval.subtract(earlier).is_err() {
                continue;
            }
        }
        if !interval.is_empty() {
            let at = |q: f64| interval.value_at_quantile(q);
            latency.insert(name, json!([at(0.5), at(0.99), at(0.999)]));
        }
    }
    let mut topics: Vec<(String, [f64; 4])> = now
        .topics
        .iter()
        .map(|(topic, traffic)| {
            let earlier = before.topics.get(topic).copied().unwrap_or_default();
            let rates = [0, 1, 2, 3].map(|i| per_second(traffic[i], earlier[i], seconds));
            (topic.clone(), rates)
        })
        .filter(|(_, rates)| rates.iter().any(|rate| *rate > 0.0))
        .collect();
    topics.sort_by(|a, b| (b.1[1] + b.1[3]).total_cmp(&(a.1[1] + a.1[3])));
    topics.truncate(TOPICS_PER_SAMPLE_MAX);
    let messages_in: f64 = now
        .topics
        .iter()
        .map(|(topic, traffic)| {
            per_second(traffic[0], before.topics.get(topic).map_or(0, |t| t[0]), seconds)
        })
        .fold(0.0, |sum, rate| sum + rate);
    let topics: Map<String, Value> = topics
        .into_iter()
        .map(|(topic, r)| {
            let series = json!({"messages_in_per_s": r[0], "bytes_in_per_s": r[1],
                "messages_out_per_s": r[2], "bytes_out_per_s": r[3]});
            (topic, series)
        })
        .collect();
    json!({
        "at_ms": now.at_ms,
        "requests_per_s": requests,
        "latency_us": latency,
        "bytes_in_per_s": per_second(now.bytes_in, before.bytes_in, seconds),
        "bytes_out_per_s": per_second(now.bytes_out, before.bytes_out, seconds),
        "messages_in_per_s": messages_in,
        "topics": topics,
    })
}

impl Charts {
    pub fn new(interval_ms: u64) -> Charts {
        Charts {
            interval: Duration::from_millis(interval_ms),
            previous: RefCell::new(None),
            samples: RefCell::new(VecDeque::new()),
        }
    }

    pub async fn sample_forever<S: Storage>(&self, node: &Node<S>) {
        loop {
            let shards = node.counters_all().await;
            self.record(Totals::of(shard::runtime::now_ms(), &shards));
            shard::runtime::sleep(self.interval).await;
        }
    }

    fn record(&self, now: Totals) {
        let before = self.previous.replace(Some(now.clone()));
        let Some(before) = before else { return };
        let mut samples = self.samples.borrow_mut();
        samples.push_back(sample(&now, &before));
        while samples.len() > SAMPLES_MAX {
            samples.pop_front();
        }
    }

    /// `GET /api/charts?since=MS`: the samples after `since`, as much as the user may see.
    pub fn answer<S: Storage>(&self, caller: &Caller<'_, S>, request: &Request) -> ConsoleResult {
        let since: i64 = match request.query("since") {
            None | Some("") => 0,
            Some(value) => {
                value.parse().map_err(|_| ConsoleError::BadRequest(format!("since = {value:?}")))?
            }
        };
        let context = caller.context(ApiKey::DescribeCluster, 0);
        let node = caller.node;
        let cluster = node.allowed(&context, AclOperation::Describe, Resource::Cluster);
        let samples: Vec<Value> = self
            .samples
            .borrow()
            .iter()
            .filter(|sample| sample["at_ms"].as_i64().unwrap_or(0) > since)
            .map(|sample| {
                let mut sample = sample.clone();
                if let Some(topics) = sample.get_mut("topics").and_then(Value::as_object_mut) {
                    topics.retain(|topic, _| {
                        node.allowed(&context, AclOperation::Describe, Resource::Topic(topic))
                    });
                }
                if !cluster {
                    for key in ["requests_per_s", "latency_us"] {
                        sample[key] = json!({});
                    }
                    for key in ["bytes_in_per_s", "bytes_out_per_s", "messages_in_per_s"] {
                        sample[key] = Value::Null;
                    }
                }
                sample
            })
            .collect();
        Ok(json!({
            "node_id": node.node_id().0,
            "interval_ms": self.interval.as_millis() as u64,
            "samples": samples,
            "cluster_series": cluster,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(values: &[u64]) -> Histogram<u64> {
        let mut histogram = Histogram::new_with_bounds(1, 60_000_000, 3).expect("bounds");
        for value in values {
            histogram.record(*value).expect("in bounds");
        }
        histogram
    }

    #[test]
    fn a_sample_holds_the_interval_not_the_cumulative_figures() {
        let mut before = Totals { at_ms: 1_000, ..Totals::default() };
        before.requests.insert(0, 100);
        before.latency.insert(0, histogram(&vec![100; 1000]));
        before.bytes_in = 1_000;
        before.topics.insert("t".into(), [10, 1_000, 0, 0]);
        let mut now = before.clone();
        now.at_ms = 3_000;
        now.requests.insert(0, 300);
        // The interval's 10 requests took 50 ms each: its p50 is 50 ms, though the cumulative
        // histogram's p50 is still 100 us.
        let mut cumulative = histogram(&vec![100; 1000]);
        cumulative.add(histogram(&[50_000; 10])).expect("same bounds");
        now.latency.insert(0, cumulative);
        now.bytes_in = 5_000;
        now.topics.insert("t".into(), [30, 3_000, 0, 0]);
        let point = sample(&now, &before);
        assert_eq!(point["requests_per_s"]["Produce"], json!(100.0));
        let p50 = point["latency_us"]["Produce"][0].as_u64().expect("p50");
        assert!((49_000..=51_000).contains(&p50), "{p50}");
        assert_eq!(point["bytes_in_per_s"], json!(2_000.0));
        assert_eq!(point["messages_in_per_s"], json!(10.0));
        assert_eq!(point["topics"]["t"]["bytes_in_per_s"], json!(1_000.0));
    }

    #[test]
    fn the_ring_keeps_an_hour_of_samples() {
        let charts = Charts::new(5_000);
        for second in 0..(SAMPLES_MAX as i64 + 10) {
            charts.record(Totals { at_ms: second * 5_000, ..Totals::default() });
        }
        assert_eq!(charts.samples.borrow().len(), SAMPLES_MAX);
    }
}
