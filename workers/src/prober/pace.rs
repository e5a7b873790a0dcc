//! How fast the prober sends: a global packets-per-second ceiling (a token bucket every connection
//! draws from, all targets together) and, per target, a pause between two connections. A TCP
//! connection is counted as [`PACKETS_PER_CONNECTION`] packets sent (SYN, ACK, data, FIN, and the
//! ACK or RST of the close), so the ceiling holds for what actually leaves the host.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// What one probe connection sends, at most, counted against the ceiling.
pub const PACKETS_PER_CONNECTION: f64 = 5.0;

#[derive(Debug)]
pub struct Pacer {
    per_second: f64,
    bucket: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Pacer {
    /// At most `max_pps` packets a second; a burst of one second's worth.
    pub fn new(max_pps: usize) -> Pacer {
        let per_second = max_pps.max(1) as f64;
        Pacer { per_second, bucket: Mutex::new(Bucket { tokens: per_second, at: Instant::now() }) }
    }

    /// Waits until `packets` may be sent, and takes them.
    pub async fn take(&self, packets: f64) {
        loop {
            let wait = {
                let mut bucket = self.bucket.lock().expect("pacer lock");
                let now = Instant::now();
                let refill = now.duration_since(bucket.at).as_secs_f64() * self.per_second;
                bucket.tokens = (bucket.tokens + refill).min(self.per_second.max(packets));
                bucket.at = now;
                if bucket.tokens >= packets {
                    bucket.tokens -= packets;
                    return;
                }
                Duration::from_secs_f64((packets - bucket.tokens) / self.per_second)
            };
            tokio::time::sleep(wait).await;
        }
    }

    /// Before one connection.
    pub async fn connection(&self) {
        self.take(PACKETS_PER_CONNECTION).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_ceiling_holds_after_the_first_second_s_burst() {
        let pacer = Pacer::new(50);
        let start = Instant::now();
        // 10 connections (50 packets) are the burst; 20 more take 2 s at 50 packets a second.
        for _ in 0..30 {
            pacer.connection().await;
        }
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(1990) && took <= Duration::from_millis(2100), "{took:?}");
    }
}
