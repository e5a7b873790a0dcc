//! Canary tokens: bait files planted in a decky that call home when an attacker uses or opens them,
//! carrying a token that names the bait. The whole of it but the routes lives here:
//! - `bait`: the pure generators (and what an uploaded blob is, and where a bait calls home), no
//!   I/O, so the same inputs always make the same bytes;
//! - `tokens`: what an operator asks of the canary (mint a token, preview its bait, store a blob);
//! - `planting`: the [`Planter`] that puts each token's bait in its decky and keeps it there, and
//!   whose outcome is the token's state;
//! - `recorder`: what a callback of a known token becomes, one [`TriggerRecorder`] both callbacks
//!   use (the HTTP `/c/{token}`, whose route is `http::canary`'s, and the DNS lookup), over
//!   `trigger` (the trigger's log line and bus event) and `limit` (how many a token may make a
//!   minute), both pure;
//! - `dns`: the canary zone's queries read and answered, and the UDP [`DnsListener`] serving them.
//!
//! Storing tokens, blobs and triggers is the repository's (`db::canary`).

pub mod bait;
pub mod dns;
mod limit;
mod planting;
mod recorder;
mod tokens;
mod trigger;

pub use bait::{
    Bait, BaitFile, BaitRequest, Callback, CallbackError, CallbackToken, CanaryKind, GenerateError, Persona, PersonaOs,
    UnknownKind, generate, sniff_content_type,
};
pub use dns::{CanaryDns, DnsListener, DnsZone};
pub use limit::{Admission, TriggerLimit};
pub use planting::{CallbackHome, PlantError, Planter};
pub use recorder::{Call, Heard, TriggerRecorder};
pub use tokens::{BaitSource, MintError, NewToken, TokenKind};
pub use trigger::{EVENT_TYPE, SERVICE, Trigger};
