//! The Word honeydoc, written by hand: a minimal WordprocessingML package (a zip of XML parts) with
//! the quarterly review, whose document has a picture linked, not embedded, from the callback (a
//! relationship with `TargetMode="External"`, DECNET's mechanism: Word and LibreOffice fetch linked
//! pictures when the document opens), and the callback again as the "live figures" hyperlink.

use std::io::{Cursor, Write};

use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime, ZipWriter};

use super::Input;
use super::report::{Report, report};
use crate::canary::bait::Bait;
use crate::text::markup_escape;

const CONTENT_TYPE: &str = "application/vnd.openxmlformats-officedocument.wordprocessingml.document";
const DECLARATION: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n";
const RELATIONSHIPS: &str = "http://schemas.openxmlformats.org/package/2006/relationships";
const OFFICE_RELATIONSHIP: &str = "http://schemas.openxmlformats.org/officeDocument/2006/relationships";

pub(super) fn make(input: &Input<'_>) -> Bait {
    let report = report(input);
    let (year, month, day) = report.date;
    let hour = input.draw.number("hour", 8, 17) as u8;
    let minute = input.draw.number("minute", 0, 59) as u8;
    let written = format!("{year}-{month:02}-{day:02}T{hour:02}:{minute:02}:00Z");
    let url = markup_escape(&report.link);

    let parts = [
        ("[Content_Types].xml", content_types()),
        (
            "_rels/.rels",
            relationships(&[
                ("rId1", "officeDocument/2006/relationships/officeDocument", "word/document.xml", false),
                ("rId2", "package/2006/relationships/metadata/core-properties", "docProps/core.xml", false),
                ("rId3", "officeDocument/2006/relationships/extended-properties", "docProps/app.xml", false),
            ]),
        ),
        ("docProps/core.xml", core_properties(&report, &written, input.draw.number("revision", 2, 9))),
        (
            "docProps/app.xml",
            format!(
                "{DECLARATION}<Properties xmlns=\"http://schemas.openxmlformats.org/officeDocument/2006/extended-properties\">\
                 <Application>Microsoft Office Word</Application><Company>{}</Company><AppVersion>16.0000</AppVersion>\
                 </Properties>",
                markup_escape(report.org)
            ),
        ),
        ("word/document.xml", document(&report)),
        (
            "word/_rels/document.xml.rels",
            relationships(&[
                ("rId8", "officeDocument/2006/relationships/image", &url, true),
                ("rId9", "officeDocument/2006/relationships/hyperlink", &url, true),
            ]),
        ),
    ];

    let options = SimpleFileOptions::default().compression_method(CompressionMethod::Deflated).last_modified_time(
        DateTime::from_date_and_time(year as u16, month as u8, day as u8, hour, minute, 0)
            .expect("report dates are valid"),
    );
    let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
    for (name, text) in parts {
        // Writing into memory fails only on a programming error (a name written twice).
        zip.start_file(name, options).expect("a new part");
        zip.write_all(text.as_bytes()).expect("writing into memory");
    }
    let content = zip.finish().expect("closing the zip in memory").into_inner();
    Bait { file: input.file(input.path.clone(), 0o644, content, CONTENT_TYPE, 21), companions: vec![] }
}

fn content_types() -> String {
    let part = |name: &str, kind: &str| format!("<Override PartName=\"/{name}\" ContentType=\"{kind}\"/>");
    format!(
        "{DECLARATION}<Types xmlns=\"http://schemas.openxmlformats.org/package/2006/content-types\">\
         <Default Extension=\"rels\" ContentType=\"application/vnd.openxmlformats-package.relationships+xml\"/>\
         <Default Extension=\"xml\" ContentType=\"application/xml\"/>{}{}{}</Types>",
        part("word/document.xml", "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"),
        part("docProps/core.xml", "application/vnd.openxmlformats-package.core-properties+xml"),
        part("docProps/app.xml", "application/vnd.openxmlformats-officedocument.extended-properties+xml"),
    )
}

/// A relationships part: (id, type under schemas.openxmlformats.org, target, external).
fn relationships(entries: &[(&str, &str, &str, bool)]) -> String {
    let mut xml = format!("{DECLARATION}<Relationships xmlns=\"{RELATIONSHIPS}\">");
    for (id, kind, target, external) in entries {
        let mode = if *external { " TargetMode=\"External\"" } else { "" };
        xml.push_str(&format!(
            "<Relationship Id=\"{id}\" Type=\"http://schemas.openxmlformats.org/{kind}\" Target=\"{target}\"{mode}/>"
        ));
    }
    xml + "</Relationships>"
}

fn core_properties(report: &Report, written: &str, revision: u64) -> String {
    format!(
        "{DECLARATION}<cp:coreProperties \
         xmlns:cp=\"http://schemas.openxmlformats.org/package/2006/metadata/core-properties\" \
         xmlns:dc=\"http://purl.org/dc/elements/1.1/\" xmlns:dcterms=\"http://purl.org/dc/terms/\" \
         xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\">\
         <dc:title>{title}</dc:title><dc:creator>{author}</dc:creator><cp:lastModifiedBy>{author}</cp:lastModifiedBy>\
         <cp:revision>{revision}</cp:revision>\
         <dcterms:created xsi:type=\"dcterms:W3CDTF\">{written}</dcterms:created>\
         <dcterms:modified xsi:type=\"dcterms:W3CDTF\">{written}</dcterms:modified></cp:coreProperties>",
        title = markup_escape(&report.title),
        author = markup_escape(&report.author),
    )
}

fn document(report: &Report) -> String {
    let run = |text: &str, properties: &str| {
        format!("<w:r>{properties}<w:t xml:space=\"preserve\">{}</w:t></w:r>", markup_escape(text))
    };
    let paragraph = |text: &str, properties: &str| format!("<w:p>{}</w:p>", run(text, properties));
    let mut body = paragraph(&report.title, "<w:rPr><w:b/><w:sz w:val=\"36\"/></w:rPr>");
    body.push_str(&paragraph(report.status, "<w:rPr><w:i/><w:color w:val=\"A33333\"/></w:rPr>"));
    body.push_str(&paragraph(&report.byline(), ""));
    for text in &report.paragraphs {
        body.push_str(&paragraph(text, ""));
    }
    let border = |side: &str| format!("<w:{side} w:val=\"single\" w:sz=\"4\" w:space=\"0\" w:color=\"999999\"/>");
    body.push_str(&format!(
        "<w:tbl><w:tblPr><w:tblW w:w=\"0\" w:type=\"auto\"/><w:tblBorders>{}{}{}{}{}{}</w:tblBorders></w:tblPr>",
        border("top"),
        border("left"),
        border("bottom"),
        border("right"),
        border("insideH"),
        border("insideV"),
    ));
    body.push_str("<w:tblGrid><w:gridCol/><w:gridCol/><w:gridCol/><w:gridCol/></w:tblGrid>");
    let header: Vec<String> = report.columns.iter().map(|name| name.to_string()).collect();
    for (at, row) in std::iter::once(header.as_slice()).chain(report.rows.iter().map(|row| row.as_slice())).enumerate()
    {
        let bold = if at == 0 { "<w:rPr><w:b/></w:rPr>" } else { "" };
        body.push_str("<w:tr>");
        for cell in row {
            body.push_str(&format!("<w:tc>{}</w:tc>", paragraph(cell, bold)));
        }
        body.push_str("</w:tr>");
    }
    body.push_str("</w:tbl>");
    body.push_str(&format!(
        "<w:p>{}<w:hyperlink r:id=\"rId9\" w:history=\"1\">{}</w:hyperlink></w:p>",
        run(&format!("{} ", report.link_label), ""),
        run(&report.link, "<w:rPr><w:color w:val=\"0563C1\"/><w:u w:val=\"single\"/></w:rPr>"),
    ));
    // The linked picture: one pixel (9525 EMU), its bytes at the callback (`r:link`, not `r:embed`).
    body.push_str(
        "<w:p><w:r><w:drawing><wp:inline distT=\"0\" distB=\"0\" distL=\"0\" distR=\"0\">\
         <wp:extent cx=\"9525\" cy=\"9525\"/><wp:docPr id=\"1\" name=\"Picture 1\"/>\
         <a:graphic><a:graphicData uri=\"http://schemas.openxmlformats.org/drawingml/2006/picture\">\
         <pic:pic><pic:nvPicPr><pic:cNvPr id=\"0\" name=\"image1.png\"/><pic:cNvPicPr/></pic:nvPicPr>\
         <pic:blipFill><a:blip r:link=\"rId8\"/><a:stretch><a:fillRect/></a:stretch></pic:blipFill>\
         <pic:spPr><a:xfrm><a:off x=\"0\" y=\"0\"/><a:ext cx=\"9525\" cy=\"9525\"/></a:xfrm>\
         <a:prstGeom prst=\"rect\"><a:avLst/></a:prstGeom></pic:spPr></pic:pic>\
         </a:graphicData></a:graphic></wp:inline></w:drawing></w:r></w:p>",
    );
    format!(
        "{DECLARATION}<w:document xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\" \
         xmlns:r=\"{OFFICE_RELATIONSHIP}\" \
         xmlns:wp=\"http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing\" \
         xmlns:a=\"http://schemas.openxmlformats.org/drawingml/2006/main\" \
         xmlns:pic=\"http://schemas.openxmlformats.org/drawingml/2006/picture\">\
         <w:body>{body}<w:sectPr><w:pgSz w:w=\"12240\" w:h=\"15840\"/>\
         <w:pgMar w:top=\"1440\" w:right=\"1440\" w:bottom=\"1440\" w:left=\"1440\" w:header=\"720\" \
         w:footer=\"720\" w:gutter=\"0\"/></w:sectPr></w:body></w:document>"
    )
}
