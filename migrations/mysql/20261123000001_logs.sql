-- The log pipeline: log rows, bounties, credentials, the ingest cursors and leases, and the counters
-- that keep the dashboard's totals cheap. Times are epoch milliseconds (UTC). Same tables as the
-- sqlite migration of the same name.
--
-- Indexed text columns are varchar(255); the backend cuts longer values to 255 characters before
-- storing them, so one odd line cannot make a batch fail forever. Exact matches compare with the
-- table collation (case-insensitive), as DECNET did on MySQL. Source and holder names compare byte
-- for byte (`utf8mb4_bin`); they are never read back, as sqlx decodes no binary-flagged column as
-- text.

create table logs (
    id bigint not null auto_increment primary key,
    timestamp bigint not null,
    decky varchar(255) not null,
    service varchar(255) not null,
    event_type varchar(255) not null,
    attacker_ip varchar(255) not null,
    raw_line mediumtext not null,
    -- A JSON object text.
    fields mediumtext not null,
    msg mediumtext null,
    trace_id varchar(64) null,
    span_id varchar(64) null,
    -- InnoDB ends every secondary key with the primary key, so `order by timestamp desc, id desc`
    -- walks an index backwards and stops after the page: unfiltered, or after one column match.
    key ix_logs_timestamp (timestamp),
    key ix_logs_decky_timestamp (decky, timestamp),
    key ix_logs_service_timestamp (service, timestamp),
    key ix_logs_event_type_timestamp (event_type, timestamp),
    key ix_logs_attacker_ip_timestamp (attacker_ip, timestamp)
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;

-- Rows stored through each ingest source, bumped in the transaction that stores them: the
-- unfiltered total is their sum, with no count over the logs. One row per source, so ingesters of
-- different sources never wait on one counter row.
create table log_totals (
    source varchar(255) collate utf8mb4_bin not null primary key,
    total bigint not null
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;

-- Rows stored per source and minute (epoch ms of the minute's start): the unfiltered histogram adds
-- these up instead of counting the logs.
create table log_minutes (
    source varchar(255) collate utf8mb4_bin not null,
    minute bigint not null,
    total bigint not null,
    primary key (source, minute)
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;

-- Every attacker address seen in the logs, so the distinct count needs no scan of the logs.
create table log_attackers (
    attacker_ip varchar(255) not null primary key
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;

create table bounty (
    id bigint not null auto_increment primary key,
    timestamp bigint not null,
    decky varchar(255) not null,
    service varchar(255) not null,
    attacker_ip varchar(255) not null,
    bounty_type varchar(255) not null,
    -- A JSON object text.
    payload mediumtext not null,
    -- Hex SHA-256 of bounty_type, attacker_ip and payload joined by NUL: a bounty is stored once.
    dedup_key char(64) character set ascii not null,
    unique key ux_bounty_dedup_key (dedup_key),
    key ix_bounty_type_timestamp (bounty_type, timestamp),
    key ix_bounty_attacker_ip_timestamp (attacker_ip, timestamp),
    key ix_bounty_timestamp (timestamp)
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;

create table credentials (
    id bigint not null auto_increment primary key,
    attacker_ip varchar(255) not null,
    decky varchar(255) not null,
    service varchar(255) not null,
    secret_kind varchar(255) not null,
    secret_sha256 char(64) character set ascii not null,
    principal text null,
    -- The principal, or "" when there is none (NULLs never collide in a unique key).
    principal_key text not null,
    secret_printable text not null,
    secret_b64 text not null,
    outcome varchar(255) null,
    attempt_count bigint not null,
    first_seen bigint not null,
    last_seen bigint not null,
    -- Hex SHA-256 of attacker_ip, decky, service, secret_kind, secret_sha256 and principal_key joined
    -- by NUL: one row per captured secret. A hash because the six columns together exceed InnoDB's
    -- longest index key (3072 bytes).
    dedup_key char(64) character set ascii not null,
    unique key ux_credentials_dedup_key (dedup_key),
    key ix_credentials_last_seen (last_seen),
    key ix_credentials_attacker_ip (attacker_ip)
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;

-- Where each source's ingestion stands, written in the transaction that stores the lines it covers.
create table ingest_cursors (
    source varchar(255) collate utf8mb4_bin not null primary key,
    -- "<dev>:<ino>" of the file being read.
    file_id varchar(255) not null,
    -- The first byte not yet stored.
    byte_offset bigint not null,
    updated_at bigint not null
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;

-- One ingester per source at a time, across processes and replicas.
create table ingest_leases (
    source varchar(255) collate utf8mb4_bin not null primary key,
    holder varchar(255) collate utf8mb4_bin not null,
    expires_at bigint not null
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;
