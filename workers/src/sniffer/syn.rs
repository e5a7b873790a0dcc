//! `tcp_syn_fingerprint`: what a client's SYN says about its stack (TTL and the initial TTL it
//! implies, window, options, TOS), and how its IP IDs and initial sequence numbers move over its
//! last SYNs (`reference/decnet-workers.md` §5: unknown below 4 samples, zero, constant,
//! incremental when every step is in (0, 0x1000], random when they vary widely).

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;

use super::packet::{Segment, TcpOptions};

/// SYNs remembered per source address.
const SAMPLES: usize = 8;

/// The classes of a series of IP IDs or sequence numbers.
fn class(samples: &VecDeque<u32>) -> &'static str {
    if samples.len() < 4 {
        return "unknown";
    }
    if samples.iter().all(|&s| s == 0) {
        return "zero";
    }
    if samples.iter().all(|&s| s == samples[0]) {
        return "constant";
    }
    let steps: Vec<u32> = samples.iter().zip(samples.iter().skip(1)).map(|(a, b)| b.wrapping_sub(*a)).collect();
    if steps.iter().all(|&d| d > 0 && d <= 0x1000) {
        return "incremental";
    }
    let values: Vec<f64> = samples.iter().map(|&s| f64::from(s)).collect();
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    let sd = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / values.len() as f64).sqrt();
    if mean > 0.0 && sd / mean > 0.5 { "random" } else { "unknown" }
}

/// The TTL a stack starts with, from what arrived.
fn initial_ttl(ttl: u8) -> u8 {
    match ttl {
        0..=32 => 32,
        33..=64 => 64,
        65..=128 => 128,
        _ => 255,
    }
}

fn os_guess(initial_ttl: u8, options: &TcpOptions) -> &'static str {
    match (initial_ttl, options.timestamps) {
        (64, true) => "linux",
        (64, false) => "unix",
        (128, _) => "windows",
        (255, _) => "network-device",
        _ => "unknown",
    }
}

/// The last SYNs per source address, bounded in addresses.
#[derive(Debug)]
pub struct SynHistory {
    max_sources: usize,
    seen: HashMap<IpAddr, (VecDeque<u32>, VecDeque<u32>, i64)>,
}

impl SynHistory {
    pub fn new(max_sources: usize) -> SynHistory {
        SynHistory { max_sources, seen: HashMap::new() }
    }

    /// The fingerprint fields of `syn` (after the 4-tuple), and the part that identifies the stack.
    pub fn fingerprint(&mut self, syn: &Segment<'_>, now_us: i64) -> (Vec<(String, String)>, String) {
        if self.seen.len() >= self.max_sources && !self.seen.contains_key(&syn.src.ip()) {
            self.forget_before(now_us - 3_600_000_000);
        }
        let entry = if self.seen.len() < self.max_sources || self.seen.contains_key(&syn.src.ip()) {
            let entry = self.seen.entry(syn.src.ip()).or_default();
            if entry.0.len() == SAMPLES {
                entry.0.pop_front();
                entry.1.pop_front();
            }
            if let Some(id) = syn.ip_id {
                entry.0.push_back(u32::from(id));
            }
            entry.1.push_back(syn.seq);
            entry.2 = now_us;
            Some(&*entry)
        } else {
            None
        };
        let (ipids, isns) = entry.map_or((0, 0), |e| (e.0.len(), e.1.len()));
        let ipid_class = entry.map_or("unknown", |e| if syn.ip_id.is_some() { class(&e.0) } else { "unknown" });
        let isn_class = entry.map_or("unknown", |e| class(&e.1));
        let options = TcpOptions::parse(syn.options);
        let initial = initial_ttl(syn.ttl);
        let os = os_guess(initial, &options);
        let fields = [
            ("ttl", syn.ttl.to_string()),
            ("initial_ttl", initial.to_string()),
            ("hop_distance", (initial - syn.ttl).to_string()),
            ("window", syn.window.to_string()),
            ("mss", options.mss.map(|m| m.to_string()).unwrap_or_default()),
            ("wscale", options.wscale.map(|w| w.to_string()).unwrap_or_default()),
            ("options_sig", options.signature.clone()),
            ("has_sack", options.sack_permitted.to_string()),
            ("has_timestamps", options.timestamps.to_string()),
            ("tos", syn.tos.to_string()),
            ("dscp", (syn.tos >> 2).to_string()),
            ("ecn", (syn.tos & 3).to_string()),
            ("ipid_class", ipid_class.to_string()),
            ("ipid_samples", ipids.to_string()),
            ("isn_class", isn_class.to_string()),
            ("isn_samples", isns.to_string()),
            ("os_guess", os.to_string()),
        ];
        let identity = format!("{os}|{}|{ipid_class}|{isn_class}", options.signature);
        (fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect(), identity)
    }

    pub fn forget_before(&mut self, cutoff_us: i64) {
        self.seen.retain(|_, e| e.2 >= cutoff_us);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_follow_the_reference_thresholds() {
        let q = |v: &[u32]| v.iter().copied().collect::<VecDeque<u32>>();
        assert_eq!(class(&q(&[1, 2, 3])), "unknown");
        assert_eq!(class(&q(&[0, 0, 0, 0])), "zero");
        assert_eq!(class(&q(&[7, 7, 7, 7])), "constant");
        assert_eq!(class(&q(&[10, 20, 4000, 4100])), "incremental");
        assert_eq!(class(&q(&[4_000_000_000, 12, 3_000_000, 900_000_000])), "random");
    }

    #[test]
    fn the_initial_ttl_is_the_next_common_start() {
        assert_eq!((initial_ttl(57), initial_ttl(64), initial_ttl(113), initial_ttl(250)), (64, 64, 128, 255));
    }
}
