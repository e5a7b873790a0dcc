//! The HTML honeydoc: the quarterly review as a saved web page, with a one-pixel image whose source
//! is the callback (DECNET's mechanism: a browser, or a mail or file preview, fetches it the moment
//! the file is shown) and the callback again as the "live figures" link.

use super::Input;
use super::report::report;
use crate::canary::bait::Bait;
use crate::text::markup_escape;

pub(super) fn make(input: &Input<'_>) -> Bait {
    let report = report(input);
    let mut rows = String::new();
    for row in &report.rows {
        rows.push_str("<tr>");
        for cell in row {
            rows.push_str(&format!("<td>{}</td>", markup_escape(cell)));
        }
        rows.push_str("</tr>\n");
    }
    let link = markup_escape(&report.link);
    let content = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{title} - {org}</title>\n\
         <style>body{{font-family:Calibri,Arial,sans-serif;margin:32px;color:#222}}\
         table{{border-collapse:collapse}}td,th{{border:1px solid #bbb;padding:4px 10px}}\
         .status{{color:#a33}}</style>\n</head>\n<body>\n<h1>{title}</h1>\n\
         <p class=\"status\">{status}</p>\n<p>{byline}</p>\n{paragraphs}\
         <table>\n<tr>{columns}</tr>\n{rows}</table>\n\
         <p>{label} <a href=\"{link}\">{link}</a></p>\n\
         <img src=\"{link}\" width=\"1\" height=\"1\" alt=\"\">\n</body>\n</html>\n",
        title = markup_escape(&report.title),
        org = markup_escape(report.org),
        status = markup_escape(report.status),
        byline = markup_escape(&report.byline()),
        paragraphs =
            report.paragraphs.iter().map(|text| format!("<p>{}</p>\n", markup_escape(text))).collect::<String>(),
        columns = report.columns.iter().map(|name| format!("<th>{}</th>", markup_escape(name))).collect::<String>(),
        label = markup_escape(report.link_label),
    );
    Bait {
        file: input.file(input.path.clone(), 0o644, content.into_bytes(), "text/html; charset=utf-8", 21),
        companions: vec![],
    }
}
