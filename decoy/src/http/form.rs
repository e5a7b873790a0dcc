//! The credentials a request carries: a login form's fields (`application/x-www-form-urlencoded`)
//! and the `Authorization` header's Basic and Bearer schemes. Secrets stay bytes, as sent.

use base64::Engine;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

/// The field names login forms use for the user (`log` is WordPress's) and for the password.
const USER_FIELDS: &[&str] = &["username", "user", "log"];
const PASSWORD_FIELDS: &[&str] = &["password", "pass", "pwd"];

/// One credential: who, the secret kind of `credential::fields`, the secret's bytes.
#[derive(Debug, PartialEq, Eq)]
pub struct Credential {
    pub principal: String,
    pub kind: &'static str,
    pub secret: Vec<u8>,
}

/// The user and password of a urlencoded login form, the first of each name; `None` when the body
/// names neither.
pub fn login(body: &[u8]) -> Option<Credential> {
    let mut user: Option<Vec<u8>> = None;
    let mut password: Option<Vec<u8>> = None;
    for pair in body.split(|&b| b == b'&') {
        let (key, value) = match pair.iter().position(|&b| b == b'=') {
            Some(at) => (&pair[..at], &pair[at + 1..]),
            None => (pair, &[][..]),
        };
        let key = percent_decode(key);
        let is = |names: &[&str]| names.iter().any(|name| key.eq_ignore_ascii_case(name.as_bytes()));
        if user.is_none() && is(USER_FIELDS) {
            user = Some(percent_decode(value));
        } else if password.is_none() && is(PASSWORD_FIELDS) {
            password = Some(percent_decode(value));
        }
    }
    if user.is_none() && password.is_none() {
        return None;
    }
    let principal = String::from_utf8_lossy(&user.unwrap_or_default()).into_owned();
    Some(Credential { principal, kind: "plaintext", secret: password.unwrap_or_default() })
}

/// Form decoding: `+` is a space, `%XX` a byte; a `%` not followed by two hex digits is itself.
pub fn percent_decode(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        match (input[i], escaped(input.get(i + 1..i + 3))) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
                continue;
            }
            (b'+', _) => out.push(b' '),
            (byte, _) => out.push(byte),
        }
        i += 1;
    }
    out
}

/// The byte two hex digits name.
fn escaped(digits: Option<&[u8]>) -> Option<u8> {
    let &[high, low] = digits? else { return None };
    let hex = |d: u8| (d as char).to_digit(16);
    Some((hex(high)? * 16 + hex(low)?) as u8)
}

/// Base64 as clients write it in Basic credentials, padded or not.
const BASIC: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// The credential of an `Authorization` header value: `Basic` (user and password, split at the
/// first `:`) or `Bearer` (a token, no principal). Other schemes, and Basic that is not base64,
/// give none: the header is still in the request's `headers`.
pub fn authorization(value: &[u8]) -> Option<Credential> {
    let value = value.trim_ascii();
    let split = value.iter().position(u8::is_ascii_whitespace).unwrap_or(value.len());
    let (scheme, rest) = (&value[..split], value[split..].trim_ascii());
    if scheme.eq_ignore_ascii_case(b"basic") {
        let decoded = BASIC.decode(rest).ok()?;
        let (user, password) = match decoded.iter().position(|&b| b == b':') {
            Some(at) => (&decoded[..at], &decoded[at + 1..]),
            None => (&decoded[..], &[][..]),
        };
        let principal = String::from_utf8_lossy(user).into_owned();
        Some(Credential { principal, kind: "plaintext", secret: password.to_vec() })
    } else if scheme.eq_ignore_ascii_case(b"bearer") && !rest.is_empty() {
        Some(Credential { principal: String::new(), kind: "http_bearer", secret: rest.to_vec() })
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plaintext(principal: &str, secret: &[u8]) -> Option<Credential> {
        Some(Credential { principal: principal.into(), kind: "plaintext", secret: secret.to_vec() })
    }

    #[test]
    fn login_forms_give_the_first_user_and_password_decoded() {
        assert_eq!(login(b"username=admin&password=s3cr%21t"), plaintext("admin", b"s3cr!t"));
        assert_eq!(login(b"log=wp+admin&pwd=%ff%00x&wp-submit=Log+In&pwd=second"), plaintext("wp admin", b"\xff\x00x"));
        assert_eq!(login(b"Pass=only"), plaintext("", b"only"));
        assert_eq!(login(b"user"), plaintext("", b""));
        assert_eq!(login(b"q=search&page=2"), None);
        assert_eq!(login(b""), None);
    }

    #[test]
    fn a_stray_percent_is_kept() {
        assert_eq!(percent_decode(b"100%"), b"100%");
        assert_eq!(percent_decode(b"%4"), b"%4");
        assert_eq!(percent_decode(b"%zz%41"), b"%zzA");
        assert_eq!(percent_decode(b"a%2Bb+c"), b"a+b c");
    }

    #[test]
    fn basic_and_bearer_headers() {
        assert_eq!(authorization(b"Basic Ym9iOmh1bnRlcjI6eA=="), plaintext("bob", b"hunter2:x"));
        assert_eq!(authorization(b"basic  Ym9iOmh1bnRlcjI6eA"), plaintext("bob", b"hunter2:x"));
        assert_eq!(authorization(b"Basic Ym9i"), plaintext("bob", b""));
        assert_eq!(authorization(b"Basic !!!"), None);
        assert_eq!(
            authorization(b"Bearer abc.def"),
            Some(Credential { principal: String::new(), kind: "http_bearer", secret: b"abc.def".to_vec() })
        );
        assert_eq!(authorization(b"Bearer "), None);
        assert_eq!(authorization(b"Digest username=\"x\""), None);
    }
}
