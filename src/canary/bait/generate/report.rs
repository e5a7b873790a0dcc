//! The text of the honeydocs (HTML, Word, PDF): a quarter's operations review, drafted by someone in
//! the organisation, with a table of figures and a link to the "live figures", which is the callback,
//! so the URL is there to read and click as well as fetched on open.

use super::Input;
use super::people;

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const REGIONS: [&str; 6] = ["us-east", "us-west", "eu-central", "eu-west", "ap-southeast", "sa-east"];

pub(super) struct Report {
    pub org: &'static str,
    pub title: String,
    pub status: &'static str,
    pub author: String,
    pub author_email: String,
    /// (year, month, day) it was written.
    pub date: (u32, u32, u32),
    pub paragraphs: Vec<String>,
    pub columns: [&'static str; 4],
    pub rows: Vec<[String; 4]>,
    pub link_label: &'static str,
    pub link: String,
}

impl Report {
    /// "14 October 2025".
    pub fn date_text(&self) -> String {
        let (year, month, day) = self.date;
        format!("{day} {} {year}", MONTHS[month as usize - 1])
    }

    /// The byline under the title.
    pub fn byline(&self) -> String {
        format!("Prepared by {} <{}>, {}", self.author, self.author_email, self.date_text())
    }
}

pub(super) fn report(input: &Input<'_>) -> Report {
    let draw = &input.draw;
    let org = people::org(draw);
    let author = people::person(draw, "author");
    let quarter = draw.number("quarter", 1, 3) as u32;
    let year = 2025;
    let first_region = draw.number("regions", 0, REGIONS.len() as u64 - 1) as usize;
    let rows: Vec<[String; 4]> = (0..4)
        .map(|at| {
            let label = format!("row{at}");
            [
                REGIONS[(first_region + at) % REGIONS.len()].to_string(),
                draw.number(&format!("{label}/incidents"), 4, 31).to_string(),
                format!("{:.1}", draw.number(&format!("{label}/mttr"), 12, 58) as f64 / 10.0),
                format!("99.{:02}%", draw.number(&format!("{label}/availability"), 80, 99)),
            ]
        })
        .collect();
    let worst = rows.iter().max_by_key(|row| row[1].parse::<u32>().unwrap_or_default()).expect("four rows");
    Report {
        org: org.name,
        title: format!("Q{quarter} {year} Operations Review"),
        status: draw.pick("status", &["Draft for leadership review", "Internal, not for distribution"]),
        author: author.full_name(),
        author_email: author.email(org.domain),
        date: (year, quarter * 3 + 1, draw.number("day", 2, 28) as u32),
        paragraphs: vec![
            format!(
                "This review covers incidents, recovery times and availability across our regions for the \
                 quarter. Figures are preliminary until finance signs off the Q{quarter} close."
            ),
            format!(
                "{} had the most incidents ({}), mostly from the storage migration; the remediation plan \
                 and owners are tracked in the platform backlog.",
                worst[0], worst[1]
            ),
        ],
        columns: ["Region", "Incidents", "MTTR (h)", "Availability"],
        rows,
        link_label: "Live figures and drill-down:",
        link: input.callback.url().to_string(),
    }
}
