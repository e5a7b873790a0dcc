-- Webhooks: the subscriptions operators make, and the outbox of events accepted for delivery.
-- Times are epoch milliseconds (UTC). Never edit an applied migration; add a new one.

create table webhook_subscriptions (
    uuid text primary key not null,
    name text not null,
    -- The name lower-cased (in Rust, identically for both backends): `SIEM` and `siem` are one name.
    name_key text not null unique,
    url text not null,
    -- The HMAC key. Never listed, never logged; returned once, at creation.
    secret text not null,
    -- A JSON list of bus subject patterns (`attacker.>`, `decky.*.state`).
    topic_patterns text not null,
    enabled integer not null default 1,
    consecutive_failures integer not null default 0,
    last_success_at integer,
    last_failure_at integer,
    last_error text,
    auto_disabled_at integer,
    created_at integer not null,
    updated_at integer not null
);

-- One row per event and webhook until it is delivered (then deleted) or refused by the receiver.
-- `body` is the exact JSON that is signed and sent, so a retry sends the same bytes.
create table webhook_outbox (
    id integer primary key autoincrement,
    webhook_uuid text not null references webhook_subscriptions (uuid) on delete cascade,
    event_id text not null,
    topic text not null,
    body text not null,
    attempts integer not null default 0,
    next_attempt_at integer not null,
    last_error text,
    created_at integer not null,
    unique (webhook_uuid, event_id)
);
create index ix_webhook_outbox_next_attempt_at on webhook_outbox (next_attempt_at);
