//! The behaviour class of an attacker from its event count, distinct services and inter-arrival
//! times: DECNET's rules (`decnet/profiler/classify.py`, reference §4), in DECNET's order, so a
//! dashboard shows the same class for the same events.

/// What the rules look at.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timing {
    /// Events folded in.
    pub events: i64,
    /// Distinct services.
    pub services: usize,
    /// Mean inter-arrival time, seconds.
    pub mean_s: f64,
    /// Population standard deviation of the inter-arrival times, seconds.
    pub stdev_s: f64,
}

impl Timing {
    /// Coefficient of variation; 0 when the mean is 0 (every event at once), as DECNET has it.
    pub fn cv(&self) -> f64 {
        if self.mean_s > 0.0 { self.stdev_s / self.mean_s } else { 0.0 }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BehaviorClass {
    Unknown,
    SlowScan,
    Scanning,
    BruteForce,
    Beaconing,
    Interactive,
    Mixed,
}

impl BehaviorClass {
    pub fn as_str(self) -> &'static str {
        match self {
            BehaviorClass::Unknown => "unknown",
            BehaviorClass::SlowScan => "slow_scan",
            BehaviorClass::Scanning => "scanning",
            BehaviorClass::BruteForce => "brute_force",
            BehaviorClass::Beaconing => "beaconing",
            BehaviorClass::Interactive => "interactive",
            BehaviorClass::Mixed => "mixed",
        }
    }
}

/// The first rule that matches wins.
pub fn classify(t: &Timing) -> BehaviorClass {
    let (n, svc, mean, cv) = (t.events, t.services, t.mean_s, t.cv());
    if n < 3 {
        BehaviorClass::Unknown
    } else if svc >= 2 && mean >= 10.0 && n >= 4 {
        BehaviorClass::SlowScan
    } else if (svc >= 3 && mean < 10.0) || (svc >= 2 && mean < 2.0) {
        BehaviorClass::Scanning
    } else if svc == 1 && n >= 8 && mean < 5.0 && cv < 0.6 {
        BehaviorClass::BruteForce
    } else if cv < 0.35 && mean >= 5.0 && n >= 4 {
        BehaviorClass::Beaconing
    } else if cv >= 0.5 && mean < 5.0 && n >= 6 {
        BehaviorClass::Interactive
    } else {
        BehaviorClass::Mixed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use BehaviorClass::*;

    fn class(events: i64, services: usize, mean_s: f64, stdev_s: f64) -> BehaviorClass {
        classify(&Timing { events, services, mean_s, stdev_s })
    }

    #[test]
    fn cv_is_zero_without_a_mean() {
        assert_eq!(Timing { events: 5, services: 1, mean_s: 0.0, stdev_s: 0.0 }.cv(), 0.0);
        assert_eq!(Timing { events: 5, services: 1, mean_s: 4.0, stdev_s: 1.0 }.cv(), 0.25);
    }

    #[test]
    fn fewer_than_three_events_is_unknown() {
        assert_eq!(class(0, 0, 0.0, 0.0), Unknown);
        assert_eq!(class(2, 5, 100.0, 0.0), Unknown);
        assert_ne!(class(3, 5, 100.0, 0.0), Unknown);
    }

    #[test]
    fn slow_scan_boundaries() {
        assert_eq!(class(4, 2, 10.0, 0.0), SlowScan, "mean exactly 10");
        assert_eq!(class(4, 2, 9.999, 0.0), Beaconing, "mean just under 10: not slow; regular, so beaconing");
        assert_eq!(class(3, 2, 60.0, 0.0), Mixed, "n 3 is too few: beaconing also needs 4");
        assert_eq!(class(3, 3, 60.0, 0.0), Mixed);
        assert_eq!(class(4, 1, 60.0, 0.0), Beaconing, "one service is not a scan");
    }

    #[test]
    fn scanning_boundaries() {
        assert_eq!(class(3, 3, 9.99, 50.0), Scanning);
        assert_eq!(class(3, 3, 10.0, 0.0), Mixed, "mean 10 is not fast; n 3 not slow");
        assert_eq!(class(3, 2, 1.99, 0.0), Scanning);
        assert_eq!(class(3, 2, 2.0, 0.0), Mixed, "mean exactly 2 with two services");
        // slow_scan wins over scanning when both could hold.
        assert_eq!(class(4, 3, 10.0, 0.0), SlowScan);
    }

    #[test]
    fn brute_force_boundaries() {
        assert_eq!(class(8, 1, 1.0, 0.5), BruteForce);
        assert_eq!(class(7, 1, 1.0, 0.1), Mixed, "n 7");
        assert_eq!(class(8, 1, 5.0, 0.5), Beaconing, "mean exactly 5 is not under 5; cv 0.1");
        assert_eq!(class(8, 1, 1.0, 0.6), Interactive, "cv exactly 0.6");
        assert_eq!(class(8, 1, 1.0, 0.599), BruteForce);
        assert_eq!(class(8, 0, 1.0, 0.0), Mixed, "no service");
    }

    #[test]
    fn beaconing_boundaries() {
        assert_eq!(class(4, 1, 5.0, 0.0), Beaconing);
        assert_eq!(class(4, 1, 4.999, 0.0), Mixed);
        assert_eq!(class(4, 1, 10.0, 3.4999), Beaconing);
        assert_eq!(class(4, 1, 10.0, 3.5), Mixed, "cv exactly 0.35");
        assert_eq!(class(3, 1, 10.0, 0.0), Mixed, "n 3");
    }

    #[test]
    fn interactive_boundaries() {
        assert_eq!(class(6, 1, 2.0, 1.0), Interactive, "cv exactly 0.5");
        assert_eq!(class(6, 1, 2.0, 0.999), Mixed, "cv just under 0.5");
        assert_eq!(class(5, 1, 2.0, 2.0), Mixed, "n 5");
        assert_eq!(class(6, 1, 5.0, 5.0), Mixed, "mean exactly 5");
        assert_eq!(class(7, 1, 0.0, 0.0), Mixed, "all at once: cv 0 is not interactive");
    }
}
