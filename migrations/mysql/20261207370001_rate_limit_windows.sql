-- The rate limits' fixed windows, counted in the database so that every API replica counts each
-- attempt once for the whole deployment (spec Limits). One row per limit, key and window; a window
-- past its end is useless and pruned by `expires_at`.
create table rate_limit_windows (
    limit_name varchar(32) not null,
    limit_key varchar(255) not null,
    window_index bigint not null,
    hits integer not null,
    expires_at bigint not null,
    primary key (limit_name, limit_key, window_index),
    index ix_rate_limit_windows_expires_at (expires_at)
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;
