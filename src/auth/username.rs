//! The username policy, one for every way a user is made (the API and `svc user add`).

/// Longest username accepted, in characters.
pub const MAX_CHARS: usize = 64;

/// Every variant states the whole rule: a caller that gets one can fix the name in one go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UsernameError {
    #[error("a username is 1 to 64 characters, without surrounding spaces or control characters")]
    Empty,
    #[error("a username is 1 to 64 characters, without surrounding spaces or control characters")]
    TooLong,
    #[error("a username is 1 to 64 characters, without surrounding spaces or control characters")]
    Unprintable,
}

pub fn check_username(username: &str) -> Result<(), UsernameError> {
    if username.is_empty() {
        return Err(UsernameError::Empty);
    }
    if username.chars().count() > MAX_CHARS {
        return Err(UsernameError::TooLong);
    }
    if username.trim() != username || username.chars().any(char::is_control) {
        return Err(UsernameError::Unprintable);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_and_printability() {
        assert_eq!(check_username(""), Err(UsernameError::Empty));
        assert_eq!(check_username("a"), Ok(()));
        assert_eq!(check_username(&"é".repeat(64)), Ok(()));
        assert_eq!(check_username(&"é".repeat(65)), Err(UsernameError::TooLong));
        assert_eq!(check_username(" bob"), Err(UsernameError::Unprintable));
        assert_eq!(check_username("bob\n"), Err(UsernameError::Unprintable));
        assert_eq!(check_username("bob smith"), Ok(()));
    }
}
