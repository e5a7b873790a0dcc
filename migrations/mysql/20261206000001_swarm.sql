-- The swarm: the worker hosts enrolled into this master (DECNET's `swarm_hosts`), the deckies each
-- reports running (DECNET's `decky_shards`), and the enrollment bundles not yet fetched. Times are
-- epoch milliseconds (UTC). Never edit an applied migration; add a new one.

create table swarm_hosts (
    uuid char(36) not null primary key,
    -- `^[a-z0-9][a-z0-9-]{0,62}$`: the agent certificate's CN.
    name varchar(64) not null,
    -- Where the master dials the agent: empty until the bundle is fetched (the fetcher's address).
    address varchar(253) not null default '',
    agent_port int not null,
    -- enrolled | active | unreachable (a row is deleted on decommission, never marked).
    status varchar(32) not null,
    last_heartbeat bigint null,
    -- Lowercase hex SHA-256 of each issued leaf's DER; the master pins its peers by them.
    client_cert_fingerprint char(64) null,
    updater_cert_fingerprint char(64) null,
    enrolled_at bigint not null,
    notes text null,
    use_ipvlan boolean not null default false,
    unique key ux_swarm_hosts_name (name),
    key ix_swarm_hosts_status (status)
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;

create table decky_shards (
    decky_name varchar(255) not null primary key,
    host_uuid char(36) not null,
    -- A JSON list of service names.
    services mediumtext not null,
    -- The decky's DeckyConfig as JSON, from the last dispatch or heartbeat.
    decky_config mediumtext null,
    decky_ip varchar(64) null,
    -- pending | running | failed | torn_down | degraded | tearing_down | teardown_failed
    state varchar(32) not null,
    last_error text null,
    compose_hash varchar(128) null,
    last_seen bigint null,
    updated_at bigint not null,
    key ix_decky_shards_host_uuid (host_uuid),
    key ix_decky_shards_state (state),
    constraint fk_decky_shards_host foreign key (host_uuid) references swarm_hosts (uuid) on delete cascade
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;

-- One row per enrollment bundle until its `.tgz` is fetched (the row is then deleted, so a second
-- fetch finds nothing) or it expires. Only the token's SHA-256 is stored: the token itself is the
-- credential, shown once to the operator. Kept here, not in memory, so every API replica serves it.
create table swarm_enrollments (
    token_hash char(64) not null primary key,
    host_uuid char(36) not null,
    master_host varchar(253) not null,
    with_updater boolean not null,
    services_ini mediumtext null,
    created_at bigint not null,
    expires_at bigint not null,
    key ix_swarm_enrollments_expires_at (expires_at),
    constraint fk_swarm_enrollments_host foreign key (host_uuid) references swarm_hosts (uuid) on delete cascade
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;
