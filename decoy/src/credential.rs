//! The credential shape of DECNET's services (`reference/decnet-workers.md` §1): what an
//! `auth_attempt` line carries so that the ingester stores a credential.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use svc_core::text::printable;

use crate::emit::Fields;

/// The fields of one attempt: `principal`, `secret_kind`, `secret_printable` (bytes outside
/// printable ASCII as `?`), `secret_b64` (the bytes as sent), `outcome` when known.
pub fn fields(principal: &str, secret_kind: &str, secret: &[u8], outcome: Option<&str>) -> Fields {
    let mut fields = vec![
        ("username", principal.to_string()),
        ("principal", principal.to_string()),
        ("secret_kind", secret_kind.to_string()),
        ("secret_printable", printable(secret)),
        ("secret_b64", STANDARD.encode(secret)),
    ];
    if let Some(outcome) = outcome {
        fields.push(("outcome", outcome.to_string()));
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_keep_their_bytes_and_show_only_printable_ones() {
        let fields = fields("root", "plaintext", b"pa\xffss\n", Some("failure"));
        let get = |k: &str| fields.iter().find(|(key, _)| *key == k).map(|(_, v)| v.as_str());
        assert_eq!(get("secret_printable"), Some("pa?ss?"));
        assert_eq!(get("secret_b64"), Some("cGH/c3MK"));
        assert_eq!(get("principal"), Some("root"));
        assert_eq!(get("outcome"), Some("failure"));
    }
}
