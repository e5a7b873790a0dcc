//! Access tokens: HS256 JWTs pinned to our issuer, audience and type. Every claim we mint is required
//! at decode; anything else about the token (revocation, the user's state) is `session`'s job.

use chrono::{DateTime, Duration, TimeZone, Utc};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub const ISSUER: &str = "svc";
pub const AUDIENCE: &str = "svc-dashboard";
pub const ACCESS: &str = "access";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The user's uuid.
    pub sub: Uuid,
    pub jti: String,
    /// Issued at, epoch seconds.
    pub iat: i64,
    pub exp: i64,
    pub iss: String,
    pub aud: String,
    pub typ: String,
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

    /// A token for `user` issued now. `valid_from` is the user's `tokens_valid_from`: a token must
    /// not predate it, and it can lie up to a second ahead (see [`tokens_valid_from`]).
    pub fn mint(&self, user: Uuid, valid_from: Option<DateTime<Utc>>, now: DateTime<Utc>) -> anyhow::Result<String> {
        let iat = valid_from.map_or(now.timestamp(), |from| now.timestamp().max(from.timestamp()));
        let claims = Claims {
            sub: user,
            jti: Uuid::new_v4().simple().to_string(),
            iat,
            exp: iat + self.lifetime.num_seconds(),
            iss: ISSUER.into(),
            aud: AUDIENCE.into(),
            typ: ACCESS.into(),
        };
        Ok(jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)?)
    }

    /// Checks signature, algorithm, expiry, issuer, audience and type, and that every claim is present.
    pub fn decode(&self, token: &str) -> Result<Claims, InvalidToken> {
        let claims = jsonwebtoken::decode::<Claims>(token, &self.decoding, &self.validation)
            .map_err(|e| InvalidToken(e.to_string()))?
            .claims;
        if claims.typ != ACCESS {
            return Err(InvalidToken(format!("type `{}` is not `{ACCESS}`", claims.typ)));
        }
        if claims.jti.is_empty() {
            return Err(InvalidToken("empty jti".into()));
        }
        Ok(claims)
    }
}

/// The instant from which a user's tokens count after a password or role change: `now` rounded up to
/// the next whole second. Token times are whole seconds, so every token issued up to `now` predates
/// it, while a token minted afterwards is stamped with this instant at the earliest.
pub fn tokens_valid_from(now: DateTime<Utc>) -> DateTime<Utc> {
    let floor = now.timestamp();
    let next = if now.timestamp_subsec_nanos() == 0 { floor } else { floor + 1 };
    Utc.timestamp_opt(next, 0).single().unwrap_or(now)
}

/// Whether a token issued at `iat` (epoch seconds) survives the user's `tokens_valid_from`.
pub fn issued_after(iat: i64, valid_from: Option<DateTime<Utc>>) -> bool {
    valid_from.is_none_or(|from| iat * 1000 >= from.timestamp_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_minted_after_a_change_survives_it_and_one_minted_before_does_not() {
        let keys = TokenKeys::new(b"0123456789abcdef0123456789abcdef", Duration::minutes(5));
        let user = Uuid::new_v4();
        let before = Utc::now();
        let old = keys.decode(&keys.mint(user, None, before).unwrap()).unwrap();
        let from = tokens_valid_from(before + Duration::milliseconds(1));
        assert!(!issued_after(old.iat, Some(from)));

        let new = keys.decode(&keys.mint(user, Some(from), Utc::now()).unwrap()).unwrap();
        assert!(issued_after(new.iat, Some(from)));
        assert_eq!(new.sub, user);
        assert_eq!(new.exp - new.iat, 300);
    }

    #[test]
    fn rounds_up_to_the_next_second() {
        let at = Utc.timestamp_millis_opt(1_700_000_000_001).unwrap();
        assert_eq!(tokens_valid_from(at).timestamp(), 1_700_000_001);
        let whole = Utc.timestamp_opt(1_700_000_000, 0).unwrap();
        assert_eq!(tokens_valid_from(whole), whole);
    }
}
