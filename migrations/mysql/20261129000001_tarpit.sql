-- The tarpit: one rule per decky (upserted; a new id each time it is replaced) with where and how
-- it was last put in force, and the watcher's open sessions (one per decky, attacker address and
-- port), kept so a restart neither enters a caught attacker twice nor loses its exit.
-- Times are epoch milliseconds (UTC). Never edit an applied migration; add a new one.

create table tarpit_rules (
    decky_name varchar(64) not null primary key,
    id char(36) not null,
    -- A JSON list of TCP ports.
    ports text not null,
    delay_ms int not null,
    created_at bigint not null,
    -- The admin's uuid.
    created_by char(36) not null,
    -- `pending` (not applied yet), `delay` (netem), `throttle` (the kernel lacks netem: the ports
    -- are rate-limited instead, no delay) or `failed`.
    enforcement varchar(16) not null default 'pending',
    -- The network namespace it was applied in (`<boot id>/<inode>`): another one means the decky
    -- or the host restarted and the rule must be applied again.
    enforced_in varchar(64) null,
    enforced_at bigint null
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;

create table tarpit_sessions (
    decky_name varchar(64) not null,
    -- An IPv4 or IPv6 address as text (IPv4-mapped IPv6 is stored as IPv4).
    attacker_ip varchar(45) not null,
    port int not null,
    entered_at bigint not null,
    primary key (decky_name, attacker_ip, port)
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;
