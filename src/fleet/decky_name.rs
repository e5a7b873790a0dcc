//! What a decky may be called: 1 to 64 of a-z, 0-9 and `-`, so that the API's paths, the
//! container's name and its hostname can all carry it. The rule is written here once:
//! [`is_decky_name`] checks it, [`DECKY_NAME_PATTERN`] states it (in refusals and, through
//! [`DeckyName`]'s schema, in the OpenAPI document), and a [`DeckyName`] is a name that passed it.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};

/// The rule as a regular expression, for clients.
pub const DECKY_NAME_PATTERN: &str = "^[a-z0-9-]{1,64}$";

/// Whether `name` is one a decky may have.
pub fn is_decky_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// A decky's name that follows the rule; reading one that does not fails with pydantic's words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeckyName(pub String);

impl<'de> Deserialize<'de> for DeckyName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        if is_decky_name(&name) {
            Ok(DeckyName(name))
        } else {
            Err(serde::de::Error::custom(format!("String should match pattern '{DECKY_NAME_PATTERN}'")))
        }
    }
}

impl utoipa::PartialSchema for DeckyName {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new().schema_type(Type::String).pattern(Some(DECKY_NAME_PATTERN)).into()
    }
}

impl utoipa::ToSchema for DeckyName {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("DeckyName")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_and_the_pattern_say_the_same() {
        let pattern = regex::Regex::new(DECKY_NAME_PATTERN).unwrap();
        for name in ["web-01", "a", &"a".repeat(64), "", &"a".repeat(65), "Web", "web_01", "wéb", "web 01", "-"] {
            assert_eq!(is_decky_name(name), pattern.is_match(name), "{name:?}");
        }
        let refused = serde_json::from_str::<DeckyName>("\"Web\"").unwrap_err().to_string();
        assert_eq!(refused, "String should match pattern '^[a-z0-9-]{1,64}$'");
    }
}
