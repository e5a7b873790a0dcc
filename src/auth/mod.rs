//! Authentication primitives shared by the API and the operator's CLI.

pub mod password;
