-- Users, token revocation, stream tickets, key/value state and decky lifecycle records.
-- Times are epoch milliseconds (UTC). Never edit an applied migration; add a new one.

create table users (
    uuid char(36) not null primary key,
    username varchar(255) not null,
    -- The username lower-cased (in Rust, identically for both backends), compared byte for byte:
    -- `Bob` and `bob` are one user, `ádmin` and `admin ` are not `admin`.
    username_key varbinary(255) not null,
    password_hash varchar(255) not null,
    role varchar(16) not null default 'viewer',
    must_change_password boolean not null default false,
    tokens_valid_from bigint null,
    created_at bigint not null,
    unique key ux_users_username_key (username_key)
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;

create table revoked_tokens (
    jti varchar(64) not null primary key,
    user_uuid char(36) not null,
    expires_at bigint not null,
    revoked_at bigint not null,
    key ix_revoked_tokens_user_uuid (user_uuid),
    key ix_revoked_tokens_expires_at (expires_at)
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;

-- The ticket itself is never stored, only its SHA-256, so a database read cannot open a stream.
create table sse_tickets (
    ticket_hash char(64) not null primary key,
    user_uuid char(36) not null,
    expires_at bigint not null,
    created_at bigint not null,
    key ix_sse_tickets_expires_at (expires_at)
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;

create table state (
    `key` varchar(255) not null primary key,
    value mediumtext not null
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;

create table decky_lifecycle (
    id char(36) not null primary key,
    decky_name varchar(64) not null,
    host_uuid char(36) null,
    operation varchar(16) not null,
    status varchar(16) not null default 'pending',
    error text null,
    started_at bigint not null,
    updated_at bigint not null,
    completed_at bigint null,
    key ix_decky_lifecycle_decky_name (decky_name),
    key ix_decky_lifecycle_host_uuid (host_uuid),
    key ix_decky_lifecycle_operation (operation),
    key ix_decky_lifecycle_status_started (status, started_at)
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;
