-- The profiler's output and what the attacker views read: one profile per source address, the
-- commands seen from it, and behavioural observations. Times are epoch milliseconds (UTC), except the
-- observation windows and `ts`, which keep the envelope's epoch seconds (fractions included) so a
-- record reads back exactly as it was sent. Same tables as the MySQL migration of the same name. The
-- profiler's cursor is the `state` row `profiler_cursor` (the decimal last log id folded in).

create table attackers (
    uuid text primary key not null,
    -- One profile per address: the profiler upserts by uuid, and an address stored under another
    -- uuid makes its commit a conflict rather than a second profile.
    ip text not null unique,
    first_seen integer not null,
    last_seen integer not null,
    event_count integer not null,
    -- service_count, decky_count, traversal_path and is_traversal follow from `services` and
    -- `deckies`; they are stored so that SQL can sort and filter on them.
    service_count integer not null,
    decky_count integer not null,
    -- A JSON array text of strings, sorted.
    services text not null,
    -- A JSON array text of strings, in the order of first contact.
    deckies text not null,
    traversal_path text not null,
    is_traversal integer not null,
    bounty_count integer not null,
    credential_count integer not null,
    -- A JSON array text: the payload of every fingerprint bounty of the address.
    fingerprints text not null,
    -- Recounted from attacker_commands in the transaction that stores them.
    command_count integer not null,
    -- A JSON object text shown by the API.
    behavior text not null,
    -- A JSON object text only the profiler reads.
    fold_state text not null,
    updated_at integer not null
);
-- One per sort of the attacker list, each ending with the uuid that breaks ties, so a page is a
-- walk down one index.
create index ix_attackers_recent on attackers (last_seen, uuid);
create index ix_attackers_active on attackers (event_count, uuid);
create index ix_attackers_traversals on attackers (is_traversal, last_seen, uuid);

create table attacker_commands (
    id integer primary key autoincrement,
    attacker_uuid text not null,
    -- A log row yields at most one command: folding a row again never stores it twice.
    log_id integer not null unique,
    timestamp integer not null,
    service text not null,
    decky text not null,
    command text not null
);
-- The newest-first pages of one attacker's commands, of all services or of one.
create index ix_attacker_commands_attacker on attacker_commands (attacker_uuid, timestamp, log_id);
create index ix_attacker_commands_attacker_service on attacker_commands (attacker_uuid, service, timestamp, log_id);

create table observations (
    -- The record's own UUID, or one given on arrival.
    id text primary key not null,
    -- The attacker's uuid when identity_ref is one, else null.
    attacker_uuid text,
    identity_ref text,
    primitive text not null,
    -- A JSON text (the value's type depends on the primitive).
    value text not null,
    confidence real not null,
    window_start real not null,
    window_end real not null,
    source text not null,
    evidence_ref text,
    -- Hex SHA-256 of evidence_ref and primitive joined by NUL, null without an evidence_ref: one
    -- record per piece of evidence and primitive. A hash because on MySQL an evidence reference may
    -- exceed the longest index key; both backends key alike.
    evidence_key text unique,
    envelope_v integer not null,
    ts real,
    received_at integer not null
);
create index ix_observations_attacker_window on observations (attacker_uuid, window_end);
