//! Paged listings: the `limit` and `offset` every listing takes ([`Paging`], checked one way) and
//! the body every page is answered with ([`Page`]: `{total, limit, offset, data}`). What a page lists
//! names its page in the OpenAPI document ([`Listed`]), so the document keeps the names clients
//! were generated from (`LogsResponse`, `AttackersResponse`…) while the shape is written once.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use utoipa::openapi::schema::{ArrayBuilder, KnownFormat, ObjectBuilder, SchemaFormat, Type};
use utoipa::openapi::{Ref, RefOr, Schema};
use utoipa::{PartialSchema, ToSchema};

use super::extract::{FieldError, check_range};

/// Rows per page when `limit` is not given.
pub const DEFAULT_LIMIT: i64 = 50;
/// The most rows a page of most listings holds.
pub const MAX_LIMIT: i64 = 1000;
/// The largest `offset`: what both backends bind as a 32-bit count.
pub const MAX_OFFSET: i64 = i32::MAX as i64;

/// Where a page starts and how many rows it holds, from checked query parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Paging {
    pub limit: u32,
    pub offset: u64,
}

impl Paging {
    /// Checks `limit` (1 to `max_limit`, default [`DEFAULT_LIMIT`]) and `offset` (0 to
    /// [`MAX_OFFSET`], default 0), for a query's `Validate`.
    pub fn check(limit: Option<i64>, offset: Option<i64>, max_limit: i64, errors: &mut Vec<FieldError>) {
        check_range("limit", limit.unwrap_or(DEFAULT_LIMIT), 1, max_limit, errors);
        check_range("offset", offset.unwrap_or(0), 0, MAX_OFFSET, errors);
    }

    /// The paging of parameters [`Paging::check`] passed (so in range).
    pub fn of(limit: Option<i64>, offset: Option<i64>) -> Paging {
        Paging { limit: limit.unwrap_or(DEFAULT_LIMIT) as u32, offset: offset.unwrap_or(0) as u64 }
    }

    /// The page of `page`'s rows, each as the client sees it.
    pub fn page<R, T: From<R>>(self, page: crate::db::Page<R>) -> Page<T> {
        self.page_of(page.total, page.rows.into_iter().map(T::from).collect())
    }

    /// The page of `data`, `total` rows matching in all.
    pub fn page_of<T>(self, total: u64, data: Vec<T>) -> Page<T> {
        Page { total, limit: self.limit, offset: self.offset, data }
    }
}

/// One page of a listing.
#[derive(Debug, Serialize, Deserialize)]
pub struct Page<T> {
    /// Rows matching the filter, on every page.
    pub total: u64,
    pub limit: u32,
    pub offset: u64,
    pub data: Vec<T>,
}

/// What a listing lists, as the OpenAPI document names its page.
pub trait Listed: ToSchema {
    /// The page's schema name.
    const PAGE: &'static str;
    /// What `total` counts, for the document.
    const COUNTED: &'static str;
}

impl<T: Listed> PartialSchema for Page<T> {
    fn schema() -> RefOr<Schema> {
        let count = |format| {
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .format(Some(SchemaFormat::KnownFormat(format)))
                .minimum(Some(0))
        };
        ObjectBuilder::new()
            .property("total", count(KnownFormat::Int64).description(Some(T::COUNTED)))
            .property("limit", count(KnownFormat::Int32))
            .property("offset", count(KnownFormat::Int64))
            .property("data", ArrayBuilder::new().items(Ref::from_schema_name(T::name())))
            .required("total")
            .required("limit")
            .required("offset")
            .required("data")
            .into()
    }
}

impl<T: Listed> ToSchema for Page<T> {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed(T::PAGE)
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((T::name().into_owned(), T::schema()));
        T::schemas(schemas);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_and_offset_are_checked_and_defaulted() {
        let errors = |limit, offset, max| {
            let mut errors = Vec::new();
            Paging::check(limit, offset, max, &mut errors);
            errors.iter().map(|e| e.loc.last().cloned().unwrap_or_default()).collect::<Vec<_>>()
        };
        assert!(errors(None, None, MAX_LIMIT).is_empty());
        assert!(errors(Some(1000), Some(MAX_OFFSET), MAX_LIMIT).is_empty());
        assert_eq!(errors(Some(0), Some(-1), MAX_LIMIT), ["limit", "offset"]);
        assert_eq!(errors(Some(201), None, 200), ["limit"]);
        assert_eq!(Paging::of(None, None), Paging { limit: 50, offset: 0 });
        assert_eq!(Paging::of(Some(7), Some(9)), Paging { limit: 7, offset: 9 });
    }
}
