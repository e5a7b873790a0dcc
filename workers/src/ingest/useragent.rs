//! Sorting a User-Agent into a category (`empty`, `scanner`, `cli`, `library`, `bot`, `browser`,
//! `nonstandard`), naming the tool where one is known, and flagging signals worth an analyst's
//! eye. Deterministic in the string alone, so the `http_useragent` bounty built from it dedupes.
//!
//! First match wins, in this order (DECNET's, with one tightening):
//! 1. `empty`: the header was sent with no value (itself a signal).
//! 2. `scanner`: a known scanner's name as a whole word anywhere (`nmap`, `masscan`, `zgrab`, …);
//!    scanners often dress up as browsers, so they are looked for first.
//! 3. `cli`: starts with a command-line client's token (`curl/`, `Wget/`, `HTTPie/`, …).
//! 4. `library`: starts with an HTTP library's token (`python-requests/`, `Go-http-client/`,
//!    `okhttp/`, `Java/`, `libwww-perl/`, …).
//! 5. `bot`: contains `bot`, `crawl`, `spider` or `slurp` (before browser: crawlers send
//!    `Mozilla/5.0 (compatible; Googlebot/2.1; …)`).
//! 6. `browser`: starts `Mozilla/` and names a rendering engine (`AppleWebKit/`, `Gecko/`,
//!    `Trident/`, `Presto/`, `EdgeHTML/`). DECNET takes any `Mozilla/<digit>`; a bare
//!    `Mozilla/5.0` is what lazy tools send, so here it is `nonstandard`.
//! 7. `nonstandard`: everything else — custom tooling and taunts.

/// What a User-Agent is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Classified {
    pub category: &'static str,
    pub tool: Option<&'static str>,
    /// `suspicious_short` (< 8 characters), `suspicious_long` (> 512), `nonprintable` (a control
    /// character other than tab), `injection_like` (an SQLi / traversal / XSS / Log4Shell / SSTI
    /// marker), in that order.
    pub signals: Vec<&'static str>,
}

const SCANNERS: &[(&str, &str)] = &[
    ("nmap", "nmap"),
    ("masscan", "masscan"),
    ("zgrab", "zgrab"),
    ("zmap", "zmap"),
    ("nuclei", "nuclei"),
    ("sqlmap", "sqlmap"),
    ("gobuster", "gobuster"),
    ("dirb", "dirb"),
    ("dirbuster", "dirbuster"),
    ("nikto", "nikto"),
    ("feroxbuster", "feroxbuster"),
    ("wfuzz", "wfuzz"),
    ("ffuf", "ffuf"),
    ("wpscan", "wpscan"),
    ("katana", "katana"),
    ("burp", "burp"),
    ("acunetix", "acunetix"),
    ("nessus", "nessus"),
    ("openvas", "openvas"),
    ("arachni", "arachni"),
    ("whatweb", "whatweb"),
    ("wappalyzer", "wappalyzer"),
    ("censysinspect", "censys"),
];

const CLIS: &[(&str, &str)] =
    &[("curl/", "curl"), ("wget/", "wget"), ("httpie/", "httpie"), ("xh/", "xh"), ("fetch/", "fetch")];

const LIBRARIES: &[(&str, &str)] = &[
    ("python-requests/", "python-requests"),
    ("aiohttp/", "aiohttp"),
    ("httpx/", "httpx"),
    ("python-urllib/", "urllib"),
    ("python/", "python-stdlib"),
    ("go-http-client/", "go-stdlib"),
    ("go-resty/", "go-resty"),
    ("java/", "java-stdlib"),
    ("okhttp/", "okhttp"),
    ("apache-httpclient/", "apache-httpclient"),
    ("libwww-perl/", "libwww-perl"),
    ("lwp::simple/", "libwww-perl"),
    ("axios/", "axios"),
    ("node-fetch/", "node-fetch"),
    ("undici", "undici"),
    ("php/", "php-stdlib"),
    ("guzzlehttp/", "guzzle"),
    ("ruby", "ruby-stdlib"),
    ("postmanruntime/", "postman"),
];

const BOT_MARKERS: &[&str] = &["bot", "crawl", "spider", "slurp"];

const BROWSER_ENGINES: &[&str] = &["applewebkit/", "gecko/", "trident/", "presto/", "edgehtml/"];

const INJECTION_MARKERS: &[&str] =
    &["<script", "';", "' or '", "' or 1", "1=1", "' --", "/../", "/etc/passwd", "${jndi:", "{{"];

/// Classifies `ua` (the header's value, as sent).
pub fn classify(ua: &str) -> Classified {
    if ua.is_empty() {
        return Classified { category: "empty", tool: None, signals: Vec::new() };
    }
    let lower = ua.to_ascii_lowercase();
    let mut signals = Vec::new();
    let length = ua.chars().count();
    if length < 8 {
        signals.push("suspicious_short");
    }
    if length > 512 {
        signals.push("suspicious_long");
    }
    if ua.chars().any(|c| c.is_control() && c != '\t') {
        signals.push("nonprintable");
    }
    if INJECTION_MARKERS.iter().any(|marker| lower.contains(marker)) {
        signals.push("injection_like");
    }

    let (category, tool) = if let Some(&(_, tool)) = SCANNERS.iter().find(|(word, _)| contains_word(&lower, word)) {
        ("scanner", Some(tool))
    } else if let Some(&(_, tool)) = CLIS.iter().find(|(prefix, _)| lower.starts_with(prefix)) {
        ("cli", Some(tool))
    } else if let Some(&(_, tool)) = LIBRARIES.iter().find(|(prefix, _)| lower.starts_with(prefix)) {
        ("library", Some(tool))
    } else if BOT_MARKERS.iter().any(|marker| lower.contains(marker)) {
        ("bot", None)
    } else if lower.starts_with("mozilla/") && BROWSER_ENGINES.iter().any(|engine| lower.contains(engine)) {
        ("browser", None)
    } else {
        ("nonstandard", None)
    };
    Classified { category, tool, signals }
}

/// `word` occurs in `text` with no letter, digit or `_` on either side.
fn contains_word(text: &str, word: &str) -> bool {
    let is_word = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_');
    let bytes = text.as_bytes();
    text.match_indices(word)
        .any(|(at, _)| !is_word(at.checked_sub(1).and_then(|i| bytes.get(i))) && !is_word(bytes.get(at + word.len())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories() {
        let cases: &[(&str, &str, Option<&str>)] = &[
            ("", "empty", None),
            ("curl/8.5.0", "cli", Some("curl")),
            ("Wget/1.21.4", "cli", Some("wget")),
            ("HTTPie/3.2.2", "cli", Some("httpie")),
            ("python-requests/2.31.0", "library", Some("python-requests")),
            ("Go-http-client/1.1", "library", Some("go-stdlib")),
            ("okhttp/4.12.0", "library", Some("okhttp")),
            ("Java/17.0.2", "library", Some("java-stdlib")),
            ("libwww-perl/6.72", "library", Some("libwww-perl")),
            (
                "Mozilla/5.0 (compatible; Nmap Scripting Engine; https://nmap.org/book/nse.html)",
                "scanner",
                Some("nmap"),
            ),
            ("masscan/1.3 (https://github.com/robertdavidgraham/masscan)", "scanner", Some("masscan")),
            ("Mozilla/5.0 zgrab/0.x", "scanner", Some("zgrab")),
            ("Mozilla/5.00 (Nikto/2.5.0) (Evasions:None) (Test:map_codes)", "scanner", Some("nikto")),
            ("sqlmap/1.8#stable (https://sqlmap.org)", "scanner", Some("sqlmap")),
            ("Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "bot", None),
            ("Baiduspider+(+http://www.baidu.com/search/spider.htm)", "bot", None),
            (
                "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36",
                "browser",
                None,
            ),
            ("Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0", "browser", None),
            ("Mozilla/5.0", "nonstandard", None),
            ("FUCKYOU/1.0", "nonstandard", None),
            // A word, not a substring: `dirbuster` is not `dirb`, `nmapper` is not `nmap`.
            (
                "DirBuster-1.0-RC1 (http://www.owasp.org/index.php/Category:OWASP_DirBuster_Project)",
                "scanner",
                Some("dirbuster"),
            ),
            ("nmapper", "nonstandard", None),
        ];
        for (ua, category, tool) in cases {
            let got = classify(ua);
            assert_eq!((got.category, got.tool), (*category, *tool), "{ua}");
        }
    }

    #[test]
    fn signals() {
        assert_eq!(classify("x").signals, ["suspicious_short"]);
        assert_eq!(classify(&"A".repeat(600)).signals, ["suspicious_long"]);
        assert_eq!(classify("curl/8.0\u{1}abc").signals, ["nonprintable"]);
        assert_eq!(classify("${jndi:ldap://x/a}").signals, ["injection_like"]);
        assert!(classify("curl/8.5.0").signals.is_empty());
    }
}
