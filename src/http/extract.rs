//! The request half of the error contract: JSON bodies, query strings and path parameters are parsed
//! and validated here, and every failure is classified in the order the spec gives — structural
//! problems first, then the three INI conflicts, then everything else — in [`reject`], the one place
//! that decides the class ([`Rejection`]; `error` gives each class its status: 400, 409, 422) from
//! each problem's kind, never from its words. A route whose 422 has words of its own says so with
//! an [`InvalidDetail`] layer. Also the gate that refuses a body not declared JSON
//! ([`require_json`]), a layer on the routes that take JSON.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, OriginalUri, Path, Request};
use axum::http::request::Parts;
use axum::http::{Extensions, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::error::Rejection;
use super::{ApiError, AppState};
use crate::auth::password::{self, PolicyError};
use crate::auth::username::{UsernameError, check_username};
use crate::fleet::ini::IniSyntaxError;

/// Validation error kinds that mean the request's shape is wrong (spec Errors, first row).
const STRUCTURAL: [&str; 5] = ["type_error", "extra_forbidden", "missing", "string_too_short", "string_type"];
pub const STRUCTURAL_DETAIL: &str =
    "Bad Request: Schema structural violation (wrong type, extra fields, or invalid length).";

/// The deploy validator's INI refusals, each a configuration conflict (409) with its own words,
/// in the order the contract checks them: the first of them among a request's problems wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum IniConflict {
    Empty,
    Format,
    NoSections,
}

impl IniConflict {
    /// What the client is told.
    fn detail(self) -> &'static str {
        match self {
            IniConflict::Empty => "Configuration conflict: INI content is empty.",
            IniConflict::Format => "Configuration conflict: INI syntax or characters are invalid.",
            IniConflict::NoSections => "Invalid INI config structure: No decky sections found.",
        }
    }
}

impl From<&IniSyntaxError> for IniConflict {
    fn from(err: &IniSyntaxError) -> Self {
        match err {
            IniSyntaxError::Empty => IniConflict::Empty,
            IniSyntaxError::Format { .. } => IniConflict::Format,
            IniSyntaxError::NoSections => IniConflict::NoSections,
        }
    }
}

/// One problem with one input field, named like the validation errors DECNET's dashboard knows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FieldError {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub loc: Vec<String>,
    pub msg: String,
    /// The INI conflict this problem is, when it is one (the client never sees this field).
    #[serde(skip)]
    pub conflict: Option<IniConflict>,
}

impl FieldError {
    pub fn new(kind: &'static str, loc: &[&str], msg: impl Into<String>) -> Self {
        FieldError { kind, loc: loc.iter().map(|s| s.to_string()).collect(), msg: msg.into(), conflict: None }
    }

    /// An INI the deploy validator refused: a value error worded as the parser words it, answered as
    /// the conflict it is.
    pub fn ini(loc: &[&str], err: &IniSyntaxError) -> Self {
        FieldError { conflict: Some(err.into()), ..FieldError::new("value_error", loc, err.to_string()) }
    }
}

/// The words a route's 422 carries in place of [`InvalidDetail::GENERIC`] (the deploy route's
/// "Invalid INI config"): the route's router adds it as a request extension
/// (`.layer(Extension(InvalidDetail(…)))`), which the extractors here read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidDetail(pub &'static str);

impl InvalidDetail {
    pub const GENERIC: InvalidDetail = InvalidDetail("Invalid request parameters");

    /// The words the route of a request with these extensions gives its 422.
    pub fn of(extensions: &Extensions) -> InvalidDetail {
        extensions.get::<InvalidDetail>().copied().unwrap_or(InvalidDetail::GENERIC)
    }
}

/// What a request model checks beyond its types (lengths, policies). Every problem is collected, so
/// a structural one anywhere wins as the contract orders.
pub trait Validate {
    fn validate(&self, _errors: &mut Vec<FieldError>) {}
}

/// The password policy as validation errors: too short is structural (400), too long is not (422).
pub fn check_password(field: &str, value: &str, errors: &mut Vec<FieldError>) {
    match password::check_policy(value) {
        Ok(()) => {}
        Err(err @ PolicyError::TooShort) => {
            errors.push(FieldError::new("string_too_short", &["body", field], err.to_string()))
        }
        Err(err @ PolicyError::TooLong) => {
            errors.push(FieldError::new("string_too_long", &["body", field], err.to_string()))
        }
    }
}

/// The username policy as validation errors: empty is structural (400), the rest is not (422).
pub fn check_name(field: &str, value: &str, errors: &mut Vec<FieldError>) {
    if let Err(err) = check_username(value) {
        let kind = match err {
            UsernameError::Empty => "string_too_short",
            UsernameError::TooLong => "string_too_long",
            UsernameError::Unprintable => "value_error",
        };
        errors.push(FieldError::new(kind, &["body", field], err.to_string()));
    }
}

/// DECNET's rule for an agent's or a decky's name: `^[a-z0-9][a-z0-9-]{0,62}$`.
pub fn is_lowercase_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    (1..=63).contains(&bytes.len())
        && (bytes[0].is_ascii_lowercase() || bytes[0].is_ascii_digit())
        && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

/// A query value a dashboard sends to mean "none": `null`, `NULL`, `undefined` or empty. DECNET's
/// dashboard puts these in URLs for unset filters, so they read as absent.
pub fn given(value: &Option<String>) -> Option<&str> {
    value.as_deref().and_then(given_text)
}

fn given_text(value: &str) -> Option<&str> {
    (!matches!(value.trim(), "" | "null" | "NULL" | "undefined")).then_some(value)
}

/// An integer query parameter within `min..=max`; out of range is a value error (422).
pub fn check_range(field: &str, value: i64, min: i64, max: i64, errors: &mut Vec<FieldError>) {
    if value < min {
        errors.push(FieldError::new(
            "greater_than_equal",
            &["query", field],
            format!("Input should be greater than or equal to {min}"),
        ));
    } else if value > max {
        errors.push(FieldError::new(
            "less_than_equal",
            &["query", field],
            format!("Input should be less than or equal to {max}"),
        ));
    }
}

/// A string query parameter of at most `max` characters (not bytes); longer is a 422.
pub fn check_max_chars(field: &str, value: Option<&str>, max: usize, errors: &mut Vec<FieldError>) {
    if value.is_some_and(|v| v.chars().count() > max) {
        errors.push(FieldError::new(
            "string_too_long",
            &["query", field],
            format!("String should have at most {max} characters"),
        ));
    }
}

/// A date/time query parameter: RFC 3339 or `YYYY-MM-DD HH:MM:SS` (UTC); anything else is a 422.
pub fn check_datetime(field: &str, value: Option<&str>, errors: &mut Vec<FieldError>) {
    let Some(value) = value else { return };
    // The pattern decides; what it lets through as a time also parses, by construction.
    let parsed = given_text(value).is_none_or(|text| crate::time::parse_utc(text).is_ok());
    if !(TIME_FILTER.is_match(value) && parsed) {
        let msg = format!("Input should match '{TIME_FILTER_PATTERN}'");
        errors.push(FieldError::new("datetime_parsing", &["query", field], msg));
    }
}

/// What a `start_time` / `end_time` filter may be, exactly, as the OpenAPI document states it:
/// blank, `null`, `NULL` or `undefined` (no filter), or a real date and time, RFC 3339 (the offset
/// optional, then UTC) or `YYYY-MM-DD HH:MM:SS[.f]`, with ASCII whitespace around it. The dates
/// are spelled out (30 days hath September, 29 February only in leap years) so the pattern alone
/// decides, for the server and for any client that reads the document.
pub const TIME_FILTER_PATTERN: &str = r"^[ \t\n\r\x0b\x0c]*(|null|NULL|undefined|([0-9]{4}-(0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|[0-9]{4}-(0[469]|11)-(0[1-9]|[12][0-9]|30)|[0-9]{4}-02-(0[1-9]|1[0-9]|2[0-8])|([0-9]{2}(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)-02-29)[T ]([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])?)[ \t\n\r\x0b\x0c]*$";

static TIME_FILTER: std::sync::LazyLock<regex::Regex> =
    std::sync::LazyLock::new(|| regex::Regex::new(TIME_FILTER_PATTERN).expect("the time filter pattern compiles"));

/// An integer in a JSON body as JSON Schema counts one, which the OpenAPI document promises:
/// `22`, and also `22.0`. A fraction or another type is a type error (400); one beyond `i64` is
/// held at its end of the range, for the range check to refuse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Integer(pub i64);

impl<'de> serde::Deserialize<'de> for Integer {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Integer;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an integer")
            }

            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Integer, E> {
                Ok(Integer(v))
            }

            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Integer, E> {
                Ok(Integer(i64::try_from(v).unwrap_or(i64::MAX)))
            }

            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Integer, E> {
                if v.is_finite() && v.fract() == 0.0 {
                    // `as` saturates at the ends of the range.
                    Ok(Integer(v as i64))
                } else {
                    Err(E::invalid_type(serde::de::Unexpected::Float(v), &self))
                }
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// The contract, in the spec's order, by each problem's kind. `detail` is the route's wording of a
/// 422; developer mode shows the error list instead.
pub fn reject(errors: &[FieldError], detail: InvalidDetail, developer: bool) -> Rejection {
    if errors.iter().any(|e| STRUCTURAL.contains(&e.kind)) {
        return Rejection::Structural;
    }
    if let Some(conflict) = errors.iter().filter_map(|e| e.conflict).min() {
        return Rejection::Conflict(conflict.detail());
    }
    Rejection::Unprocessable(if developer { json!(errors) } else { json!(detail.0) })
}

fn rejection_for(errors: &[FieldError], extensions: &Extensions, state: &AppState) -> ApiError {
    ApiError::Invalid(reject(errors, InvalidDetail::of(extensions), state.config.api.developer))
}

/// Names a deserializer's complaint the way the contract classifies it. serde's own messages are
/// stable ("missing field `x`", "unknown field …", "invalid type: …"); anything else is a value error.
fn serde_kind(message: &str) -> &'static str {
    const KINDS: [(&str, &str); 5] = [
        ("missing field", "missing"),
        ("unknown field", "extra_forbidden"),
        ("invalid type", "type_error"),
        ("unknown variant", "literal_error"),
        ("invalid digit", "int_parsing"),
    ];
    KINDS.iter().find(|(prefix, _)| message.starts_with(prefix)).map_or("value_error", |(_, kind)| kind)
}

fn json_error(err: &serde_json::Error) -> FieldError {
    use serde_json::error::Category;
    match err.classify() {
        Category::Syntax | Category::Eof | Category::Io => {
            FieldError::new("json_invalid", &["body"], "JSON decode error")
        }
        Category::Data => {
            let message = err.to_string();
            // serde_json appends " at line L column C"; the client needs the reason only.
            let reason = message.rsplit_once(" at line ").map_or(message.as_str(), |(reason, _)| reason);
            FieldError::new(serde_kind(reason), &["body"], reason)
        }
    }
}

/// JSON integers as JSON Schema (and DECNET's pydantic) count them: `10.0` is the integer 10, `10.5`
/// is no integer. For `#[serde(deserialize_with = "integral")]` on integer body fields.
pub fn integral<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: TryFrom<i128>,
{
    use serde::Deserialize;
    let number = serde_json::Number::deserialize(deserializer)?;
    let whole = match (number.as_i128(), number.as_f64()) {
        (Some(whole), _) => Some(whole),
        (None, Some(float)) if float.fract() == 0.0 && float.abs() < 1e38 => Some(float as i128),
        _ => None,
    };
    let invalid = || serde::de::Error::custom(format!("invalid type: {number} is not an integer in range"));
    T::try_from(whole.ok_or_else(invalid)?).map_err(|_| invalid())
}

/// [`integral`] for an optional field (`null` or absent is `None`; pair with `#[serde(default)]`).
pub fn integral_or_null<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: TryFrom<i128>,
{
    use serde::Deserialize;
    #[derive(Deserialize)]
    struct Whole<T: TryFrom<i128>>(#[serde(deserialize_with = "integral")] T);
    Ok(Option::<Whole<T>>::deserialize(deserializer)?.map(|Whole(value)| value))
}

/// A body field given, even as `null`: `Some` of what it holds, for `#[serde(default, deserialize_with =
/// "present")]` on an `Option<T>` field, so absent (keep as is) and `null` (clear, or refuse) differ.
pub fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

/// Parses and validates a JSON body; any failure answers per the contract.
pub fn parse_json<T: DeserializeOwned + Validate>(body: &[u8]) -> Result<T, Vec<FieldError>> {
    if body.is_empty() {
        return Err(vec![FieldError::new("missing", &["body"], "Field required")]);
    }
    // Every body is an object; serde would also fill a struct from an array, field by position.
    if body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
        let message = "Input should be a valid dictionary or object to extract fields from";
        return Err(vec![FieldError::new("type_error", &["body"], message)]);
    }
    let value: T = serde_json::from_slice(body).map_err(|e| vec![json_error(&e)])?;
    let mut errors = Vec::new();
    value.validate(&mut errors);
    if errors.is_empty() { Ok(value) } else { Err(errors) }
}

/// A JSON request body of model `T`, validated.
#[derive(Debug)]
pub struct ValidJson<T>(pub T);

impl<T: DeserializeOwned + Validate> FromRequest<AppState> for ValidJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, ApiError> {
        let detail = InvalidDetail::of(request.extensions());
        let body = Bytes::from_request(request, state).await.map_err(ApiError::UnreadableBody)?;
        let developer = state.config.api.developer;
        parse_json(&body).map(ValidJson).map_err(|errors| ApiError::Invalid(reject(&errors, detail, developer)))
    }
}

/// A query string of model `T`, validated.
#[derive(Debug)]
pub struct ValidQuery<T>(pub T);

impl<T: DeserializeOwned + Validate> FromRequestParts<AppState> for ValidQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or_default();
        let value: T = serde_urlencoded::from_str(query).map_err(|e| {
            let message = e.to_string();
            rejection_for(&[FieldError::new(serde_kind(&message), &["query"], message)], &parts.extensions, state)
        })?;
        let mut errors = Vec::new();
        value.validate(&mut errors);
        if errors.is_empty() { Ok(ValidQuery(value)) } else { Err(rejection_for(&errors, &parts.extensions, state)) }
    }
}

/// Path parameters of type `T`. A parameter that does not parse (a malformed uuid) is a 422.
#[derive(Debug)]
pub struct ValidPath<T>(pub T);

impl<T: DeserializeOwned + Send> FromRequestParts<AppState> for ValidPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(ValidPath(value)),
            Err(rejection) => {
                let error = FieldError::new("value_error", &["path"], rejection.body_text());
                Err(rejection_for(&[error], &parts.extensions, state))
            }
        }
    }
}

/// Refuses (415) a POST, PUT or PATCH under `/api/` that carries a body which is not declared JSON.
/// Bodiless requests pass (logout takes none). A layer on the routes that take JSON: a router
/// whose routes also take other bodies (uploads) puts it on the others only, and the API's
/// fallback has it too, so an unknown path under `/api/` answers as a route there would.
pub async fn require_json(request: Request, next: Next) -> Response {
    let writes = matches!(*request.method(), Method::POST | Method::PUT | Method::PATCH);
    // A nested router sees its own part of the path; the prefix is the whole one's.
    let path = request.extensions().get::<OriginalUri>().map_or(request.uri(), |original| &original.0).path();
    if writes && path.starts_with("/api/") && has_body(&request) {
        let is_json = request
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("application/json"));
        if !is_json {
            return ApiError::UnsupportedMediaType.into_response();
        }
    }
    next.run(request).await
}

fn has_body(request: &Request) -> bool {
    let headers = request.headers();
    let length = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).map(str::trim);
    let chunked = headers
        .get(header::TRANSFER_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    chunked || length.is_some_and(|l| !l.is_empty() && l != "0")
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;

    use super::*;
    use crate::http::deckies::INVALID_INI as DEPLOY;

    fn kinds(errors: &[FieldError]) -> Vec<&'static str> {
        errors.iter().map(|e| e.kind).collect()
    }

    #[test]
    fn integers_are_json_schema_integers() {
        let parse = |text: &str| serde_json::from_str::<Integer>(text).map(|i| i.0).map_err(|e| e.to_string());
        assert_eq!(parse("22"), Ok(22));
        assert_eq!(parse("22.0"), Ok(22));
        assert_eq!(parse("-3"), Ok(-3));
        assert_eq!(parse("1e30"), Ok(i64::MAX));
        assert_eq!(parse("18446744073709551615"), Ok(i64::MAX));
        assert!(parse("22.5").unwrap_err().starts_with("invalid type"));
        assert!(parse("\"22\"").unwrap_err().starts_with("invalid type"));
    }

    #[test]
    fn structural_errors_win_over_everything_else() {
        let errors = [
            FieldError::new("string_too_long", &["body", "a"], "too long"),
            FieldError::ini(&["body", "ini"], &IniSyntaxError::Empty),
            FieldError::new("missing", &["body", "b"], "Field required"),
        ];
        let (status, body) = reject(&errors, DEPLOY, false).answer();
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(body, json!({"detail": STRUCTURAL_DETAIL}));
        let must_be_string = [FieldError::new("string_type", &["body"], "value must be a string")];
        assert_eq!(reject(&must_be_string, InvalidDetail::GENERIC, false).answer().0, StatusCode::BAD_REQUEST);
    }

    /// The deploy validator arrives later; its messages already map to the right conflicts.
    #[test]
    fn the_three_ini_messages_are_conflicts_in_order() {
        let cases = [
            (IniSyntaxError::Empty, "Configuration conflict: INI content is empty."),
            (
                IniSyntaxError::Format { line: 3, reason: "a NUL character" },
                "Configuration conflict: INI syntax or characters are invalid.",
            ),
            (IniSyntaxError::NoSections, "Invalid INI config structure: No decky sections found."),
        ];
        for (message, detail) in cases {
            let rejection =
                reject(&[FieldError::ini(&["body", "ini_content"], &message)], InvalidDetail::GENERIC, true);
            let (status, body) = rejection.answer();
            assert_eq!(status, StatusCode::CONFLICT, "{message}");
            assert_eq!(body, json!({"detail": detail}));
        }
        let both = [
            FieldError::ini(&["body"], &IniSyntaxError::NoSections),
            FieldError::ini(&["body"], &IniSyntaxError::Empty),
        ];
        assert_eq!(
            reject(&both, InvalidDetail::GENERIC, false).answer().1["detail"],
            "Configuration conflict: INI content is empty."
        );
    }

    #[test]
    fn other_errors_are_422_worded_by_route_and_mode() {
        let errors = [FieldError::new("string_too_long", &["body", "password"], "at most 72 bytes")];
        assert_eq!(
            reject(&errors, InvalidDetail::GENERIC, false).answer(),
            (StatusCode::UNPROCESSABLE_ENTITY, json!({"detail": "Invalid request parameters"}))
        );
        let (_, deploy) = reject(&errors, DEPLOY, false).answer();
        assert_eq!(deploy, json!({"detail": "Invalid INI config"}));
        let (_, developer) = reject(&errors, InvalidDetail::GENERIC, true).answer();
        assert_eq!(developer["detail"][0]["type"], "string_too_long");
        assert_eq!(developer["detail"][0]["loc"], json!(["body", "password"]));
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Model {
        name: String,
        role: crate::db::Role,
        count: Option<u8>,
    }
    impl Validate for Model {}

    #[test]
    fn json_failures_are_classified() {
        let kind = |body: &str| kinds(&parse_json::<Model>(body.as_bytes()).unwrap_err());
        assert_eq!(kind(""), ["missing"]);
        assert_eq!(kind(r#"{"name": "a""#), ["json_invalid"]);
        assert_eq!(kind("not json"), ["json_invalid"]);
        assert_eq!(kind(r#"{"role": "admin"}"#), ["missing"]);
        assert_eq!(kind(r#"{"name": "a", "role": "admin", "x": 1}"#), ["extra_forbidden"]);
        assert_eq!(kind(r#"{"name": 5, "role": "admin"}"#), ["type_error"]);
        assert_eq!(kind(r#"{"name": "a", "role": "root"}"#), ["literal_error"]);
        assert_eq!(kind(r#"{"name": "a", "role": "admin", "count": 300}"#), ["value_error"]);
        assert!(parse_json::<Model>(br#"{"name": "a", "role": "viewer"}"#).is_ok());
    }
}
