//! What an uploaded blob is: its content type, told from its first bytes (and, for text, its name)
//! as DECNET's upload route does, so the instrumenter that will mutate it can be picked by type.

/// Magic prefixes, in DECNET's order.
const MAGIC: [(&[u8], &str); 10] = [
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%PDF-", "application/pdf"),
    (b"<!DOCTYPE", "text/html"),
    (b"<html", "text/html"),
    (b"<HTML", "text/html"),
    (b"<?xml", "application/xml"),
    (b"PK\x03\x04", "application/zip"),
];

/// The content type of a blob named `filename` starting with `head` (its first KiB is enough).
pub fn sniff_content_type(filename: &str, head: &[u8]) -> &'static str {
    let head = &head[..head.len().min(1024)];
    if let Some((_, mime)) = MAGIC.iter().find(|(magic, _)| head.starts_with(magic)) {
        if *mime == "application/zip" {
            // An Office document is a zip whose content types name its kind early on.
            if contains(head, b"wordprocessingml") {
                return "application/vnd.openxmlformats-officedocument.wordprocessingml.document";
            }
            if contains(head, b"spreadsheetml") {
                return "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet";
            }
        }
        return mime;
    }
    let printable = head.iter().take(128).all(|&b| matches!(b, 0x09 | 0x0a | 0x0d) || b >= 0x20);
    if printable && std::str::from_utf8(head).is_ok() {
        let name = filename.to_ascii_lowercase();
        return if name.ends_with(".json") {
            "application/json"
        } else if name.ends_with(".yaml") || name.ends_with(".yml") {
            "application/yaml"
        } else if name.ends_with(".toml") {
            "application/toml"
        } else {
            "text/plain"
        };
    }
    "application/octet-stream"
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|window| window == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_come_from_the_bytes_then_the_name() {
        assert_eq!(sniff_content_type("x.bin", b"%PDF-1.7\n"), "application/pdf");
        assert_eq!(sniff_content_type("a.gif", b"GIF89a\x01\x00"), "image/gif");
        assert_eq!(
            sniff_content_type("r.docx", b"PK\x03\x04....wordprocessingml"),
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
        );
        assert_eq!(sniff_content_type("z.zip", b"PK\x03\x04...."), "application/zip");
        assert_eq!(sniff_content_type("c.JSON", b"{\"a\": 1}"), "application/json");
        assert_eq!(sniff_content_type("notes", b"hello\n"), "text/plain");
        assert_eq!(sniff_content_type("k", b"\x00\x01\x02"), "application/octet-stream");
    }
}
