-- The tarpit: one rule per decky (upserted; a new id each time it is replaced) with where and how
-- it was last put in force, and the watcher's open sessions (one per decky, attacker address and
-- port), kept so a restart neither enters a caught attacker twice nor loses its exit.
-- Times are epoch milliseconds (UTC). Never edit an applied migration; add a new one.

create table tarpit_rules (
    decky_name text primary key not null,
    id text not null,
    -- A JSON list of TCP ports.
    ports text not null,
    delay_ms integer not null,
    created_at integer not null,
    -- The admin's uuid.
    created_by text not null,
    -- `pending` (not applied yet), `delay` (netem), `throttle` (the kernel lacks netem: the ports
    -- are rate-limited instead, no delay) or `failed`.
    enforcement text not null default 'pending',
    -- The network namespace it was applied in (`<boot id>/<inode>`): another one means the decky
    -- or the host restarted and the rule must be applied again.
    enforced_in text,
    enforced_at integer
);

create table tarpit_sessions (
    decky_name text not null,
    attacker_ip text not null,
    port integer not null,
    entered_at integer not null,
    primary key (decky_name, attacker_ip, port)
);
