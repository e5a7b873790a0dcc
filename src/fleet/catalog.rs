//! The service catalogue (`svc_core::catalog`: the decoy services and archetypes), with the OpenAPI
//! schemas the API describes service lists by; the schemas stay here so the core crate needs no
//! `utoipa`.

pub use svc_core::catalog::*;

/// The OpenAPI schema of a list of the catalog's service names (an unknown one is refused).
pub fn services_schema() -> utoipa::openapi::schema::Schema {
    service_list(false)
}

/// As [`services_schema`], or null.
pub fn services_or_null_schema() -> utoipa::openapi::schema::Schema {
    service_list(true)
}

fn service_list(nullable: bool) -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, SchemaType, Type};
    let name = ObjectBuilder::new().schema_type(Type::String).enum_values(Some(service_names()));
    let kinds = if nullable { vec![Type::Array, Type::Null] } else { vec![Type::Array] };
    ArrayBuilder::new().schema_type(SchemaType::from_iter(kinds)).items(name).into()
}
