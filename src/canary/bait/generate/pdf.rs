//! The PDF honeydoc, written by hand: one page of the quarterly review in the standard Helvetica
//! fonts (nothing to embed), whose catalog's `/OpenAction` is a `/URI` action to the callback
//! (DECNET's mechanism: a viewer follows it, or asks to, when the file opens), and whose "live
//! figures" line shows the callback under a link annotation with the same action.

use super::Input;
use super::report::{Report, report};
use crate::canary::bait::Bait;

const LEFT: f64 = 72.0;
/// Characters a line of 11-point body text holds between the margins.
const WRAP: usize = 84;

pub(super) fn make(input: &Input<'_>) -> Bait {
    let report = report(input);
    let (page, link_rect) = page_content(&report);
    let (year, month, day) = report.date;
    let hour = input.draw.number("hour", 8, 17);
    let minute = input.draw.number("minute", 0, 59);
    let created = format!("D:{year}{month:02}{day:02}{hour:02}{minute:02}00Z");
    let uri = literal(&report.link);
    let objects = [
        "<< /Type /Catalog /Pages 2 0 R /OpenAction 6 0 R /Lang (en-US) >>".to_string(),
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_string(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R /F2 5 0 R >> >> \
         /Contents 7 0 R /Annots [8 0 R] >>"
            .to_string(),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".to_string(),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>".to_string(),
        format!("<< /Type /Action /S /URI /URI {uri} >>"),
        format!("<< /Length {} >>\nstream\n{page}\nendstream", page.len()),
        format!(
            "<< /Type /Annot /Subtype /Link /Rect [{:.1} {:.1} {:.1} {:.1}] /Border [0 0 0] /A 6 0 R >>",
            link_rect[0], link_rect[1], link_rect[2], link_rect[3]
        ),
        format!(
            "<< /Title {} /Author {} /Creator (Microsoft Word for Microsoft 365) /Producer (Microsoft Word for \
             Microsoft 365) /CreationDate ({created}) /ModDate ({created}) >>",
            literal(&report.title),
            literal(&report.author),
        ),
    ];

    // A binary comment after the header, as writers put there, so transfers treat the file as binary.
    let mut pdf = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n".to_vec();
    let mut offsets = Vec::new();
    for (number, body) in objects.iter().enumerate() {
        offsets.push(pdf.len());
        pdf.extend_from_slice(format!("{} 0 obj\n{body}\nendobj\n", number + 1).as_bytes());
    }
    let xref_at = pdf.len();
    let mut xref = format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1);
    for offset in offsets {
        // Each entry is exactly 20 bytes: ten digits, five, a type and a two-byte end of line.
        xref.push_str(&format!("{offset:010} 00000 n \n"));
    }
    let id = input.draw.hex("document-id", 32);
    xref.push_str(&format!(
        "trailer\n<< /Size {} /Root 1 0 R /Info 9 0 R /ID [<{id}> <{id}>] >>\nstartxref\n{xref_at}\n%%EOF\n",
        objects.len() + 1
    ));
    pdf.extend_from_slice(xref.as_bytes());
    Bait { file: input.file(input.path.clone(), 0o644, pdf, "application/pdf", 21), companions: vec![] }
}

/// The page's content stream, and the rectangle the callback's line covers (for its link).
fn page_content(report: &Report) -> (String, [f64; 4]) {
    let mut ops = String::new();
    let mut y = 720.0;
    show(&mut ops, "F2", 18.0, LEFT, y, &report.title);
    y -= 20.0;
    show(&mut ops, "F1", 10.0, LEFT, y, report.status);
    y -= 14.0;
    show(&mut ops, "F1", 10.0, LEFT, y, &report.byline());
    y -= 30.0;
    for paragraph in &report.paragraphs {
        for text in wrapped(paragraph, WRAP) {
            show(&mut ops, "F1", 11.0, LEFT, y, &text);
            y -= 15.0;
        }
        y -= 9.0;
    }
    let columns = [LEFT, 190.0, 290.0, 390.0];
    for (x, name) in columns.iter().zip(report.columns) {
        show(&mut ops, "F2", 11.0, *x, y, name);
    }
    y -= 17.0;
    for row in &report.rows {
        for (x, cell) in columns.iter().zip(row) {
            show(&mut ops, "F1", 11.0, *x, y, cell);
        }
        y -= 15.0;
    }
    y -= 20.0;
    show(&mut ops, "F1", 10.0, LEFT, y, report.link_label);
    y -= 14.0;
    // Blue, as a link is drawn; nine points so a long base still fits the line.
    ops.push_str("0 0 0.8 rg\n");
    show(&mut ops, "F1", 9.0, LEFT, y, &report.link);
    ops.push_str("0 g\n");
    // Helvetica's characters average about half the size in width.
    let width = report.link.len() as f64 * 9.0 * 0.55;
    (ops, [LEFT - 1.0, y - 3.0, LEFT + width, y + 10.0])
}

/// One line of text at (x, y) in a font of the page (`F1` regular, `F2` bold).
fn show(ops: &mut String, font: &str, size: f64, x: f64, y: f64, text: &str) {
    ops.push_str(&format!("BT /{font} {size} Tf {x:.1} {y:.1} Td {} Tj ET\n", literal(text)));
}

/// Words regrouped into lines of at most `width` characters.
fn wrapped(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut current = String::new();
    for word in text.split_whitespace() {
        if !current.is_empty() && current.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut current));
        }
        if !current.is_empty() {
            current.push(' ');
        }
        current.push_str(word);
    }
    if !current.is_empty() {
        lines.push(current);
    }
    lines
}

/// A PDF literal string: printable ASCII with its delimiters escaped (the standard fonts' encoding
/// agrees with ASCII there); anything else becomes `?`, which the report's text never needs.
fn literal(text: &str) -> String {
    let mut out = String::from("(");
    for c in text.chars() {
        match c {
            '(' | ')' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            _ => out.push('?'),
        }
    }
    out.push(')');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_escape_their_delimiters() {
        assert_eq!(literal("a (b) \\ c—d"), "(a \\(b\\) \\\\ c?d)");
        assert_eq!(wrapped("aa bb cc", 5), ["aa bb", "cc"]);
    }
}
