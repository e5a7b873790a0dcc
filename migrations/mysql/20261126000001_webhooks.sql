-- Webhooks: the subscriptions operators make, and the outbox of events accepted for delivery.
-- Times are epoch milliseconds (UTC). Never edit an applied migration; add a new one.

create table webhook_subscriptions (
    uuid char(36) not null primary key,
    name varchar(64) not null,
    -- The name lower-cased (in Rust, identically for both backends), compared byte for byte:
    -- `SIEM` and `siem` are one name.
    name_key varbinary(512) not null,
    url text not null,
    -- The HMAC key. Never listed, never logged; returned once, at creation.
    secret varchar(1024) not null,
    -- A JSON list of bus subject patterns (`attacker.>`, `decky.*.state`).
    topic_patterns mediumtext not null,
    enabled boolean not null default true,
    consecutive_failures int not null default 0,
    last_success_at bigint null,
    last_failure_at bigint null,
    last_error text null,
    auto_disabled_at bigint null,
    created_at bigint not null,
    updated_at bigint not null,
    unique key ux_webhook_subscriptions_name_key (name_key)
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;

-- One row per event and webhook until it is delivered (then deleted) or refused by the receiver.
-- `body` is the exact JSON that is signed and sent, so a retry sends the same bytes.
create table webhook_outbox (
    id bigint not null auto_increment primary key,
    webhook_uuid char(36) not null,
    event_id char(36) not null,
    topic varchar(255) not null,
    body mediumtext not null,
    attempts int not null default 0,
    next_attempt_at bigint not null,
    last_error text null,
    created_at bigint not null,
    unique key ux_webhook_outbox_event (webhook_uuid, event_id),
    key ix_webhook_outbox_next_attempt_at (next_attempt_at),
    constraint fk_webhook_outbox_webhook foreign key (webhook_uuid)
        references webhook_subscriptions (uuid) on delete cascade
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;
