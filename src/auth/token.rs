//! Access tokens: HS256 JWTs pinned to our issuer, audience and type. Every claim we mint is required
//! at decode; anything else about the token (revocation, the user's state) is `session`'s job.

use chrono::{DateTime, Duration, TimeZone, Utc};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub const ISSUER: &str = "svc";
pub const AUDIENCE: &str = "svc-dashboard";
pub const ACCESS: &str = "access";
/// How far ahead of this replica's clock a token's `iat` may be: a replica whose clock runs ahead
/// mints tokens issued "later" (and `mint` never issues before the user's `tokens_valid_from`,
/// stamped by whichever replica changed the user). Anything further ahead was not minted by us.
pub const CLOCK_SKEW: Duration = Duration::seconds(30);

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Claims {
    /// The user's uuid.
    pub sub: Uuid,
    pub jti: String,
    /// Issued at, epoch seconds with millisecond precision (RFC 7519 allows fractions): a password
    /// change and a login in the same second must still be told apart.
    pub iat: f64,
    pub exp: i64,
    pub iss: String,
    pub aud: String,
    pub typ: String,
    /// Not before, epoch seconds: never minted here, honoured when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<f64>,
}

impl Claims {
    pub fn expires_at(&self) -> DateTime<Utc> {
        Utc.timestamp_opt(self.exp, 0).single().unwrap_or(DateTime::<Utc>::MAX_UTC)
    }
}

#[derive(Debug, thiserror::Error)]
#[error("invalid access token: {0}")]
pub struct InvalidToken(String);

pub struct TokenKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
    lifetime: Duration,
}

impl std::fmt::Debug for TokenKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenKeys").field("lifetime", &self.lifetime).finish_non_exhaustive()
    }
}

impl TokenKeys {
    pub fn new(secret: &[u8], lifetime: Duration) -> Self {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[ISSUER]);
        validation.set_audience(&[AUDIENCE]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        // We mint every token we accept; there is no other clock to forgive.
        validation.leeway = 0;
        TokenKeys {
            encoding: EncodingKey::from_secret(secret),
            decoding: DecodingKey::from_secret(secret),
            validation,
            lifetime,
        }
    }

    /// A token for `user` issued now. `valid_from` is the user's `tokens_valid_from`: a replica whose
    /// clock lags the one that changed the user still mints a token that survives the change.
    pub fn mint(&self, user: Uuid, valid_from: Option<DateTime<Utc>>, now: DateTime<Utc>) -> anyhow::Result<String> {
        let issued = valid_from.map_or(now, |from| now.max(from));
        let claims = Claims {
            sub: user,
            jti: Uuid::new_v4().simple().to_string(),
            iat: issued.timestamp_millis() as f64 / 1000.0,
            exp: issued.timestamp() + self.lifetime.num_seconds(),
            iss: ISSUER.into(),
            aud: AUDIENCE.into(),
            typ: ACCESS.into(),
            nbf: None,
        };
        Ok(jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)?)
    }

    /// Checks signature, algorithm, expiry, issuer, audience and type, and that every claim is present.
    pub fn decode(&self, token: &str) -> Result<Claims, InvalidToken> {
        self.decode_at(token, Utc::now())
    }

    /// [`decode`](Self::decode) as of `now`.
    pub fn decode_at(&self, token: &str, now: DateTime<Utc>) -> Result<Claims, InvalidToken> {
        let claims = jsonwebtoken::decode::<Claims>(token, &self.decoding, &self.validation)
            .map_err(|e| InvalidToken(e.to_string()))?
            .claims;
        if claims.typ != ACCESS {
            return Err(InvalidToken(format!("type `{}` is not `{ACCESS}`", claims.typ)));
        }
        if claims.jti.is_empty() {
            return Err(InvalidToken("empty jti".into()));
        }
        // RFC 7519 §4.1.4: the token must not be accepted on or after `exp`. The library only rejects
        // strictly after it, so a token is still good for its whole expiry second without this.
        if claims.exp <= now.timestamp() {
            return Err(InvalidToken("expired".into()));
        }
        let now_ms = now.timestamp_millis() as f64;
        if claims.iat * 1000.0 > now_ms + CLOCK_SKEW.num_milliseconds() as f64 {
            return Err(InvalidToken("issued in the future".into()));
        }
        if claims.nbf.is_some_and(|nbf| nbf * 1000.0 > now_ms) {
            return Err(InvalidToken("not valid yet (nbf)".into()));
        }
        Ok(claims)
    }
}

/// Whether a token issued at `iat` survives the user's `tokens_valid_from`.
pub fn issued_after(iat: f64, valid_from: Option<DateTime<Utc>>) -> bool {
    valid_from.is_none_or(|from| (iat * 1000.0).round() as i64 >= from.timestamp_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_ends_earlier_tokens_even_within_the_same_second() {
        let keys = TokenKeys::new(b"0123456789abcdef0123456789abcdef", Duration::minutes(5));
        let user = Uuid::new_v4();
        let old = keys.decode(&keys.mint(user, None, Utc::now()).unwrap()).unwrap();
        let change = Utc::now() + Duration::milliseconds(1);
        assert!(!issued_after(old.iat, Some(change)));

        let new = keys.decode(&keys.mint(user, Some(change), Utc::now()).unwrap()).unwrap();
        assert!(issued_after(new.iat, Some(change)), "minted at the change at the earliest");
        assert!(issued_after(new.iat, None));
        assert_eq!(new.sub, user);
        assert_eq!(new.exp - new.iat.floor() as i64, 300);
    }

    #[test]
    fn a_token_is_rejected_from_its_expiry_second_on() {
        let keys = TokenKeys::new(b"0123456789abcdef0123456789abcdef", Duration::seconds(1));
        // Whole seconds, so `exp` is exactly one second after the mint.
        let minted = Utc.timestamp_opt(Utc::now().timestamp(), 0).unwrap();
        let token = keys.mint(Uuid::new_v4(), None, minted).unwrap();
        assert!(keys.decode_at(&token, minted).is_ok(), "good before its expiry second");
        assert!(keys.decode_at(&token, minted + Duration::milliseconds(999)).is_ok());
        let at_exp = minted + Duration::seconds(1);
        let err = keys.decode_at(&token, at_exp).unwrap_err();
        assert!(err.to_string().contains("expired"), "{err}");
        assert!(keys.decode_at(&token, at_exp + Duration::milliseconds(500)).is_err());
    }

    #[test]
    fn a_token_issued_in_the_future_or_not_valid_yet_is_refused() {
        let secret = b"0123456789abcdef0123456789abcdef";
        let keys = TokenKeys::new(secret, Duration::minutes(5));
        let now = Utc::now();
        let claims = |iat: DateTime<Utc>, nbf: Option<DateTime<Utc>>| Claims {
            sub: Uuid::new_v4(),
            jti: "j".into(),
            iat: iat.timestamp() as f64,
            exp: (now + Duration::hours(2)).timestamp(),
            iss: ISSUER.into(),
            aud: AUDIENCE.into(),
            typ: ACCESS.into(),
            nbf: nbf.map(|at| at.timestamp() as f64),
        };
        let sign = |c: &Claims| {
            jsonwebtoken::encode(&Header::new(Algorithm::HS256), c, &EncodingKey::from_secret(secret)).unwrap()
        };
        let future = keys.decode_at(&sign(&claims(now + Duration::hours(1), None)), now).unwrap_err();
        assert!(future.to_string().contains("future"), "{future}");
        let early = keys.decode_at(&sign(&claims(now, Some(now + Duration::minutes(10)))), now).unwrap_err();
        assert!(early.to_string().contains("nbf"), "{early}");
        assert!(
            keys.decode_at(&sign(&claims(now, Some(now - Duration::seconds(1)))), now).is_ok(),
            "a past nbf is fine"
        );
        assert!(keys.decode_at(&sign(&claims(now + Duration::seconds(5), None)), now).is_ok(), "within the clock skew");
    }

    #[test]
    fn a_token_minted_to_expire_this_second_is_refused_now() {
        // A zero lifetime makes `exp` the current second: RFC 7519 says that is already too late.
        let keys = TokenKeys::new(b"0123456789abcdef0123456789abcdef", Duration::zero());
        let token = keys.mint(Uuid::new_v4(), None, Utc::now()).unwrap();
        assert!(keys.decode(&token).is_err());
    }
}
