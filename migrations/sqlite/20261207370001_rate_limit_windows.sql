-- The rate limits' fixed windows, counted in the database so that every API replica counts each
-- attempt once for the whole deployment (spec Limits). One row per limit, key and window; a window
-- past its end is useless and pruned by `expires_at`.
create table rate_limit_windows (
    limit_name text not null,
    limit_key text not null,
    window_index integer not null,
    hits integer not null,
    expires_at integer not null,
    primary key (limit_name, limit_key, window_index)
);
create index ix_rate_limit_windows_expires_at on rate_limit_windows (expires_at);
