//! Where a bait calls home: the token naming it, the URL it requests and the DNS name it looks up.
//! The token is the one value shared by both paths (`{base}/c/{token}` and `{token}.{zone}`), so it
//! is kept to what is valid in both: a DNS label and a URL path segment.

use ring::rand::{SecureRandom, SystemRandom};

/// A token's text: lowercase letters, digits and inner hyphens, at most 63 characters (one DNS
/// label, which is case-insensitive, so upper case would not survive a lookup).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CallbackToken(String);

impl CallbackToken {
    /// A new token: 128 random bits as 32 hex digits. DECNET's `token_urlsafe(16)` has the same
    /// strength but mixes case and `_`, neither of which a DNS name keeps.
    pub fn random() -> std::io::Result<Self> {
        let mut bytes = [0u8; 16];
        SystemRandom::new().fill(&mut bytes).map_err(|_| std::io::Error::other("no randomness for a canary token"))?;
        Ok(CallbackToken(crate::text::hex(&bytes)))
    }

    pub fn parse(text: &str) -> Result<Self, CallbackError> {
        if is_dns_label(text) && !text.bytes().any(|byte| byte.is_ascii_uppercase()) {
            Ok(CallbackToken(text.to_string()))
        } else {
            Err(CallbackError::BadToken(text.to_string()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for CallbackToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// One token's callback addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Callback {
    token: CallbackToken,
    url: String,
    dns_name: Option<String>,
}

impl Callback {
    /// `http_base` is `SVC_CANARY_HTTP_BASE` (`https://host[:port][/prefix]`); `dns_zone` the zone
    /// the canary's DNS server answers for, when there is one. The URL is `{base}/c/{token}` as in
    /// DECNET; baits may add path after it (a git remote's `…/repo.git/info/refs`), so the listener
    /// matches the segment after `/c/`, not the whole path.
    pub fn new(http_base: &str, dns_zone: Option<&str>, token: CallbackToken) -> Result<Self, CallbackError> {
        let base = http_base.trim_end_matches('/');
        let rest = base.strip_prefix("https://").or_else(|| base.strip_prefix("http://"));
        let host = rest.map(|rest| rest.split(['/', '?', '#']).next().unwrap_or_default());
        let clean = |text: &str| text.bytes().all(|byte| byte.is_ascii_graphic() && !b"\"'<>\\`{}|^".contains(&byte));
        if host.is_none_or(str::is_empty) || !clean(base) || base.contains(['?', '#']) {
            return Err(CallbackError::BadBase(http_base.to_string()));
        }
        let dns_name = match dns_zone.map(|zone| zone.trim_matches('.').to_ascii_lowercase()) {
            None => None,
            Some(zone) if zone.is_empty() => None,
            Some(zone) => {
                let name = format!("{token}.{zone}");
                if !zone.split('.').all(is_dns_label) || name.len() > 253 {
                    return Err(CallbackError::BadZone(zone));
                }
                Some(name)
            }
        };
        Ok(Callback { url: format!("{base}/c/{token}"), token, dns_name })
    }

    pub fn token(&self) -> &CallbackToken {
        &self.token
    }

    /// `{base}/c/{token}`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `{token}.{zone}`, when a zone is configured.
    pub fn dns_name(&self) -> Option<&str> {
        self.dns_name.as_deref()
    }
}

pub(crate) fn is_dns_label(text: &str) -> bool {
    (1..=63).contains(&text.len())
        && text.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'-')
        && !text.starts_with('-')
        && !text.ends_with('-')
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CallbackError {
    #[error("canary callback base {0:?} is not an http(s) URL without query or fragment")]
    BadBase(String),
    #[error("canary DNS zone {0:?} is not a DNS name")]
    BadZone(String),
    #[error("canary token {0:?} is not a lowercase DNS label")]
    BadToken(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_tokens_are_dns_labels_and_differ() {
        let first = CallbackToken::random().unwrap();
        let second = CallbackToken::random().unwrap();
        assert_ne!(first, second);
        assert_eq!(first.as_str().len(), 32);
        assert_eq!(CallbackToken::parse(first.as_str()).unwrap(), first);
    }

    #[test]
    fn the_url_and_name_carry_the_token() {
        let token = CallbackToken::parse("0f3a9c").unwrap();
        let callback = Callback::new("https://cb.example.net/", Some("Trap.Example.NET."), token).unwrap();
        assert_eq!(callback.url(), "https://cb.example.net/c/0f3a9c");
        assert_eq!(callback.dns_name(), Some("0f3a9c.trap.example.net"));
        let without = Callback::new("http://127.0.0.1:8088/x", Some(""), callback.token().clone()).unwrap();
        assert_eq!((without.url(), without.dns_name()), ("http://127.0.0.1:8088/x/c/0f3a9c", None));
    }

    #[test]
    fn malformed_inputs_are_refused() {
        let token = || CallbackToken::parse("ab12").unwrap();
        for base in ["ftp://x", "https://", "https://x/a b", "https://x/?q=1", "x.example", "https://x/\"y"] {
            assert_eq!(Callback::new(base, None, token()), Err(CallbackError::BadBase(base.to_string())), "{base}");
        }
        assert!(matches!(Callback::new("https://x", Some("a..b"), token()), Err(CallbackError::BadZone(_))));
        assert!(matches!(Callback::new("https://x", Some("a_b.c"), token()), Err(CallbackError::BadZone(_))));
        for text in ["", "Ab", "a_b", "-a", "a/b", &"a".repeat(64)] {
            assert!(CallbackToken::parse(text).is_err(), "{text}");
        }
    }
}
