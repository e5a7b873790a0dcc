-- The profiler's output and what the attacker views read: one profile per source address, the
-- commands seen from it, and behavioural observations. Times are epoch milliseconds (UTC), except the
-- observation windows and `ts`, which keep the envelope's epoch seconds (fractions included) so a
-- record reads back exactly as it was sent. Same tables as the sqlite migration of the same name. The
-- profiler's cursor is the `state` row `profiler_cursor` (the decimal last log id folded in).
--
-- Indexed text columns are varchar(255), as in the logs migration; the backend cuts longer values to
-- 255 characters before storing them. UUIDs are ascii, so keys that hold one stay short.

create table attackers (
    uuid char(36) character set ascii not null primary key,
    -- One profile per address: the profiler upserts by uuid, and an address stored under another
    -- uuid makes its commit a conflict rather than a second profile.
    ip varchar(255) not null,
    first_seen bigint not null,
    last_seen bigint not null,
    event_count bigint not null,
    -- service_count, decky_count, traversal_path and is_traversal follow from `services` and
    -- `deckies`; they are stored so that SQL can sort and filter on them.
    service_count bigint not null,
    decky_count bigint not null,
    -- A JSON array text of strings, sorted.
    services mediumtext not null,
    -- A JSON array text of strings, in the order of first contact.
    deckies mediumtext not null,
    traversal_path mediumtext not null,
    is_traversal boolean not null,
    bounty_count bigint not null,
    credential_count bigint not null,
    -- A JSON array text: the payload of every fingerprint bounty of the address.
    fingerprints mediumtext not null,
    -- Recounted from attacker_commands in the transaction that stores them.
    command_count bigint not null,
    -- A JSON object text shown by the API.
    behavior mediumtext not null,
    -- A JSON object text only the profiler reads.
    fold_state mediumtext not null,
    updated_at bigint not null,
    unique key ux_attackers_ip (ip),
    -- One per sort of the attacker list, each ending with the uuid that breaks ties (InnoDB would
    -- append the primary key anyway), so a page is a walk down one index.
    key ix_attackers_recent (last_seen, uuid),
    key ix_attackers_active (event_count, uuid),
    key ix_attackers_traversals (is_traversal, last_seen, uuid)
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;

create table attacker_commands (
    id bigint not null auto_increment primary key,
    attacker_uuid char(36) character set ascii not null,
    -- A log row yields at most one command: folding a row again never stores it twice.
    log_id bigint not null,
    timestamp bigint not null,
    service varchar(255) not null,
    decky varchar(255) not null,
    command mediumtext not null,
    unique key ux_attacker_commands_log_id (log_id),
    -- The newest-first pages of one attacker's commands, of all services or of one.
    key ix_attacker_commands_attacker (attacker_uuid, timestamp, log_id),
    key ix_attacker_commands_attacker_service (attacker_uuid, service, timestamp, log_id)
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;

create table observations (
    -- The record's own UUID, or one given on arrival.
    id varchar(255) not null primary key,
    -- The attacker's uuid when identity_ref is one, else null.
    attacker_uuid char(36) character set ascii null,
    identity_ref text null,
    primitive varchar(255) not null,
    -- A JSON text (the value's type depends on the primitive).
    value mediumtext not null,
    confidence double not null,
    window_start double not null,
    window_end double not null,
    source text not null,
    evidence_ref text null,
    -- Hex SHA-256 of evidence_ref and primitive joined by NUL, null without an evidence_ref: one
    -- record per piece of evidence and primitive. A hash because an evidence reference may exceed
    -- InnoDB's longest index key (3072 bytes).
    evidence_key char(64) character set ascii null,
    envelope_v bigint not null,
    ts double null,
    received_at bigint not null,
    unique key ux_observations_evidence_key (evidence_key),
    key ix_observations_attacker_window (attacker_uuid, window_end)
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;
