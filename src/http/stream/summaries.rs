//! The unfiltered statistics and histogram every log stream sends, computed at most once a second
//! for all of a process's streams together (both read the whole log table), and the histogram of a
//! filtered stream, computed for it alone.

use std::time::Duration;

use crate::db::{Db, DbResult, LogFilter};
use crate::fleet::Fleet;
use crate::http::logs::{DEFAULT_INTERVAL_MINUTES, HistogramPoint};
use crate::http::stats::{self, StatsResponse};
use crate::recent::Recent;

/// Unfiltered statistics and histogram are computed at most this often for all streams together.
const SUMMARY_REUSE: Duration = Duration::from_secs(1);

/// The histogram of the rows `filter` matches, in the log page's default buckets.
pub(super) async fn histogram(db: &Db, filter: &LogFilter) -> DbResult<Vec<HistogramPoint>> {
    let buckets = db.log_histogram(filter, DEFAULT_INTERVAL_MINUTES as u32).await?;
    Ok(buckets.into_iter().map(HistogramPoint::from).collect())
}

/// The unfiltered statistics and histogram every stream sends, computed at most once a second for
/// all of them: both read the whole log table.
#[derive(Debug, Default)]
pub struct Summaries {
    stats: Recent<StatsResponse>,
    histogram: Recent<Vec<HistogramPoint>>,
}

impl Summaries {
    pub(super) async fn stats(&self, db: &Db, fleet: &Fleet) -> DbResult<StatsResponse> {
        self.stats.get_or_try_find(SUMMARY_REUSE, stats::summary(db, fleet)).await
    }

    pub(super) async fn histogram(&self, db: &Db) -> DbResult<Vec<HistogramPoint>> {
        self.histogram.get_or_try_find(SUMMARY_REUSE, histogram(db, &LogFilter::default())).await
    }
}
