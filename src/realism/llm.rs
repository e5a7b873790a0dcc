//! The LLM provider realism's writers may ask for bodies, in DECNET's shape (`GET/PUT
//! /realism/llm`, `decnet/realism/llm/config.py`): which provider, where, which model, how long to
//! wait. The API key is not part of it: it is kept sealed beside it (`db::realism`) and only its
//! presence is ever shown. The checks are DECNET's (a provider it knows, an `http(s)` base URL
//! stored without its trailing `/`, a timeout above zero) and a few it lacks: a base URL must
//! parse and carry no credentials (those belong in the key, which is never shown), the timeout is
//! at most an hour, a model is named.

use serde::{Deserialize, Serialize};

use super::Refused;

/// The providers DECNET accepts (`fake` is its test double).
pub const PROVIDERS: [&str; 2] = ["fake", "ollama"];
/// The longest a generation may be waited for, in seconds.
pub const MAX_TIMEOUT: f64 = 3600.0;
/// The longest base URL and model name kept.
pub const MAX_URL_CHARS: usize = 2000;
pub const MAX_MODEL_CHARS: usize = 256;
/// The longest API key kept.
pub const MAX_KEY_CHARS: usize = 4096;

/// The provider settings as stored (the key aside).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmSettings {
    pub provider: String,
    pub base_url: Option<String>,
    pub model: String,
    pub timeout: f64,
}

impl Default for LlmSettings {
    /// DECNET's: a local Ollama (no base URL: its own daemon), `llama3.1`, one minute.
    fn default() -> Self {
        LlmSettings { provider: "ollama".into(), base_url: None, model: "llama3.1".into(), timeout: 60.0 }
    }
}

impl LlmSettings {
    /// The stored text read back (the defaults when it no longer reads).
    pub fn stored(text: &str) -> LlmSettings {
        super::stored_or_default(text, super::LLM)
    }

    pub fn set_provider(&mut self, provider: String) -> Result<(), Refused> {
        if !PROVIDERS.contains(&provider.as_str()) {
            return Err(Refused(format!("provider must be one of ['fake', 'ollama'], got '{provider}'")));
        }
        self.provider = provider;
        Ok(())
    }

    /// An empty URL clears it (the provider's local default).
    pub fn set_base_url(&mut self, base_url: Option<String>) -> Result<(), Refused> {
        self.base_url = match base_url.filter(|url| !url.is_empty()) {
            None => None,
            Some(url) => Some(checked_url(&url)?),
        };
        Ok(())
    }

    pub fn set_model(&mut self, model: String) -> Result<(), Refused> {
        let chars = model.trim().chars().count();
        if chars == 0 || chars > MAX_MODEL_CHARS {
            return Err(Refused(format!("model must be 1 to {MAX_MODEL_CHARS} characters")));
        }
        self.model = model.trim().to_string();
        Ok(())
    }

    pub fn set_timeout(&mut self, timeout: f64) -> Result<(), Refused> {
        if !(timeout > 0.0 && timeout <= MAX_TIMEOUT) {
            return Err(Refused(format!("timeout must be greater than 0 and at most {MAX_TIMEOUT} seconds")));
        }
        self.timeout = timeout;
        Ok(())
    }
}

/// `url` as stored: `http` or `https`, a host, no credentials, no trailing `/`.
fn checked_url(url: &str) -> Result<String, Refused> {
    let must = || Refused("base_url must start with http:// or https://".into());
    let lower = url.to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        return Err(must());
    }
    if url.chars().count() > MAX_URL_CHARS {
        return Err(Refused(format!("base_url must be at most {MAX_URL_CHARS} characters")));
    }
    let parsed = url::Url::parse(url).map_err(|_| Refused("base_url is not a valid URL".into()))?;
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(Refused("base_url is not a valid URL".into()));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(Refused("base_url must not carry credentials; give the key as api_key".into()));
    }
    Ok(url.trim_end_matches('/').to_string())
}

/// Whether an API key is within bounds.
pub fn check_key(key: &str) -> Result<(), Refused> {
    if key.chars().count() > MAX_KEY_CHARS {
        return Err(Refused(format!("api_key must be at most {MAX_KEY_CHARS} characters")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decnets_checks_and_ours() {
        let mut settings = LlmSettings::default();
        settings.set_provider("fake".into()).unwrap();
        assert!(settings.set_provider("openai".into()).unwrap_err().0.contains("got 'openai'"));
        settings.set_base_url(Some("HTTPS://llm.example:11434/".into())).unwrap();
        assert_eq!(settings.base_url.as_deref(), Some("HTTPS://llm.example:11434"));
        settings.set_base_url(Some(String::new())).unwrap();
        assert_eq!(settings.base_url, None);
        for url in ["ftp://x.example", "llm.example", "http://", "http://user:pw@llm.example"] {
            assert!(settings.set_base_url(Some(url.into())).is_err(), "{url}");
        }
        for timeout in [0.0, -1.0, 3600.5, f64::NAN] {
            assert!(settings.set_timeout(timeout).is_err(), "{timeout}");
        }
        settings.set_timeout(0.5).unwrap();
        assert!(settings.set_model("  ".into()).is_err());
        assert_eq!(LlmSettings::stored("{"), LlmSettings::default());
    }
}
