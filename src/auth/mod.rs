//! Authentication: password hashing off the request loop, access tokens (JWT), the revocation
//! checks every authenticated request passes, and single-use stream tickets. HTTP concerns (headers,
//! status codes, role gates) live in `http::guard`.

pub mod hashing;
pub mod password;
pub mod session;
pub mod ticket;
pub mod token;
pub mod username;
