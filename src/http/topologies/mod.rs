//! The topology routes as DECNET's dashboard uses them: list, generate (seeded), blank, read with
//! LANs/deckies/edges, status events, deploy and teardown (202, in the background), delete, the
//! pending-only child edits of LANs, deckies and edges (`expected_version` locking), the catalog
//! (`services`, `archetypes`, `next-subnet`, `next-ip`), the mutation queue and the email
//! personas. Path ids are UUIDs (anything else is 422); 404 and 409 texts are DECNET's. The event
//! stream is in `stream`.
//!
//! This module owns the router and the error mapping the parts share: [`lifecycle`] (a topology as
//! a whole), [`children`] (the pending-only edits of its parts), [`mutations`] (the queue),
//! [`personas`] and [`catalog`].

mod catalog;
mod children;
mod lifecycle;
mod mutations;
mod personas;

pub use catalog::*;
pub use children::*;
pub use lifecycle::*;
pub use mutations::*;
pub use personas::*;

use axum::routing::get;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::extract::FieldError;
use super::{ApiError, AppState};
use crate::topology::TopologyError;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        // Also without the trailing slash the document (as DECNET's) gives it.
        .route("/topologies", get(list).post(create))
        .routes(routes!(blank))
        .routes(routes!(services))
        .routes(routes!(archetypes))
        .routes(routes!(next_subnet))
        .routes(routes!(detail, remove))
        .routes(routes!(status_events))
        .routes(routes!(personas, replace_personas))
        .routes(routes!(deploy))
        .routes(routes!(teardown))
        .routes(routes!(mutations, enqueue))
        .routes(routes!(add_lan))
        .routes(routes!(update_lan, remove_lan))
        .routes(routes!(lan_next_ip))
        .routes(routes!(add_decky))
        .routes(routes!(update_decky, remove_decky))
        .routes(routes!(add_edge))
        .routes(routes!(remove_edge))
}

fn topology_error(err: TopologyError) -> ApiError {
    match err {
        TopologyError::NotFound(text) => ApiError::not_found(text),
        TopologyError::Conflict(text) => ApiError::conflict(text),
        TopologyError::BadRequest(text) => ApiError::bad_request(text),
        TopologyError::Store(err) => err.into(),
    }
}

fn range_error(errors: &mut Vec<FieldError>, field: &str, value: f64, min: f64, max: f64) {
    if value < min {
        errors.push(FieldError::new(
            "greater_than_equal",
            &["body", field],
            format!("Input should be greater than or equal to {min}"),
        ));
    } else if value > max {
        errors.push(FieldError::new(
            "less_than_equal",
            &["body", field],
            format!("Input should be less than or equal to {max}"),
        ));
    }
}

fn name_error(errors: &mut Vec<FieldError>, field: &str, value: &str) {
    if value.is_empty() {
        errors.push(FieldError::new("string_too_short", &["body", field], "String should have at least 1 character"));
    } else if value.chars().count() > 64 {
        errors.push(FieldError::new("string_too_long", &["body", field], "String should have at most 64 characters"));
    }
}

/// A LAN's or decky's own swarm host: a topology runs whole on one host (its `target_host_uuid`),
/// so only null (or absence) is accepted.
fn no_swarm_host_schema() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    ObjectBuilder::new()
        .schema_type(Type::Null)
        .description(Some(
            "A part's own swarm host; a topology runs whole on the host its target_host_uuid names, so any value is refused (400).",
        ))
        .into()
}
