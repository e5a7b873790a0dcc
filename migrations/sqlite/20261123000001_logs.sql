-- The log pipeline: log rows, bounties, credentials, the ingest cursors and leases, and the counters
-- that keep the dashboard's totals cheap. Times are epoch milliseconds (UTC). Same tables as the
-- MySQL migration of the same name.

-- AUTOINCREMENT: an id is never reused, even after the newest rows are deleted, because the log
-- stream resumes from the last id it sent.
create table logs (
    id integer primary key autoincrement,
    timestamp integer not null,
    decky text not null,
    service text not null,
    event_type text not null,
    attacker_ip text not null,
    raw_line text not null,
    -- A JSON object text.
    fields text not null,
    msg text,
    trace_id text,
    span_id text
);
-- Every index ends with the rowid (`id`), so `order by timestamp desc, id desc` walks an index
-- backwards and stops after the page: unfiltered, or after one column match, with or without a
-- time range.
create index ix_logs_timestamp on logs (timestamp);
create index ix_logs_decky_timestamp on logs (decky, timestamp);
create index ix_logs_service_timestamp on logs (service, timestamp);
create index ix_logs_event_type_timestamp on logs (event_type, timestamp);
create index ix_logs_attacker_ip_timestamp on logs (attacker_ip, timestamp);

-- Rows stored through each ingest source, bumped in the transaction that stores them: the
-- unfiltered total is their sum, with no count over the logs.
create table log_totals (
    source text primary key not null,
    total integer not null
) without rowid;

-- Rows stored per source and minute (epoch ms of the minute's start): the unfiltered histogram adds
-- these up instead of counting the logs.
create table log_minutes (
    source text not null,
    minute integer not null,
    total integer not null,
    primary key (source, minute)
) without rowid;

-- Every attacker address seen in the logs, so the distinct count needs no scan of the logs.
create table log_attackers (
    attacker_ip text primary key not null
) without rowid;

create table bounty (
    id integer primary key autoincrement,
    timestamp integer not null,
    decky text not null,
    service text not null,
    attacker_ip text not null,
    bounty_type text not null,
    -- A JSON object text.
    payload text not null,
    -- Hex SHA-256 of bounty_type, attacker_ip and payload joined by NUL: a bounty is stored once.
    dedup_key text not null unique
);
create index ix_bounty_type_timestamp on bounty (bounty_type, timestamp);
create index ix_bounty_attacker_ip_timestamp on bounty (attacker_ip, timestamp);
create index ix_bounty_timestamp on bounty (timestamp);

create table credentials (
    id integer primary key autoincrement,
    attacker_ip text not null,
    decky text not null,
    service text not null,
    secret_kind text not null,
    secret_sha256 text not null,
    principal text,
    -- The principal, or "" when there is none (NULLs never collide in a unique key).
    principal_key text not null,
    secret_printable text not null,
    secret_b64 text not null,
    outcome text,
    attempt_count integer not null,
    first_seen integer not null,
    last_seen integer not null,
    -- Hex SHA-256 of attacker_ip, decky, service, secret_kind, secret_sha256 and principal_key joined
    -- by NUL: one row per captured secret. A hash because on MySQL the six columns together exceed
    -- the longest index key; both backends key alike.
    dedup_key text not null unique
);
create index ix_credentials_last_seen on credentials (last_seen);
create index ix_credentials_attacker_ip on credentials (attacker_ip);

-- Where each source's ingestion stands, written in the transaction that stores the lines it covers.
create table ingest_cursors (
    source text primary key not null,
    -- "<dev>:<ino>" of the file being read.
    file_id text not null,
    -- The first byte not yet stored.
    byte_offset integer not null,
    updated_at integer not null
);

-- One ingester per source at a time, across processes and replicas.
create table ingest_leases (
    source text primary key not null,
    holder text not null,
    expires_at integer not null
);
