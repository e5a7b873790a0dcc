-- Users, token revocation, stream tickets, key/value state and decky lifecycle records.
-- Times are epoch milliseconds (UTC). Never edit an applied migration; add a new one.

create table users (
    uuid text primary key not null,
    username text not null,
    -- The username lower-cased (in Rust, identically for both backends): `Bob` and `bob` are one user,
    -- `ádmin` and `admin ` are not `admin`.
    username_key text not null unique,
    password_hash text not null,
    role text not null default 'viewer',
    must_change_password integer not null default 0,
    tokens_valid_from integer,
    created_at integer not null
);

create table revoked_tokens (
    jti text primary key not null,
    user_uuid text not null,
    expires_at integer not null,
    revoked_at integer not null
);
create index ix_revoked_tokens_user_uuid on revoked_tokens (user_uuid);
create index ix_revoked_tokens_expires_at on revoked_tokens (expires_at);

-- The ticket itself is never stored, only its SHA-256, so a database read cannot open a stream.
create table sse_tickets (
    ticket_hash text primary key not null,
    user_uuid text not null,
    expires_at integer not null,
    created_at integer not null
);
create index ix_sse_tickets_expires_at on sse_tickets (expires_at);

create table state (
    key text primary key not null,
    value text not null
);

create table decky_lifecycle (
    id text primary key not null,
    decky_name text not null,
    host_uuid text,
    operation text not null,
    status text not null default 'pending',
    error text,
    started_at integer not null,
    updated_at integer not null,
    completed_at integer
);
create index ix_decky_lifecycle_decky_name on decky_lifecycle (decky_name);
create index ix_decky_lifecycle_host_uuid on decky_lifecycle (host_uuid);
create index ix_decky_lifecycle_operation on decky_lifecycle (operation);
create index ix_decky_lifecycle_status_started on decky_lifecycle (status, started_at);
