-- The swarm: the worker hosts enrolled into this master (DECNET's `swarm_hosts`), the deckies each
-- reports running (DECNET's `decky_shards`), and the enrollment bundles not yet fetched. Times are
-- epoch milliseconds (UTC). Never edit an applied migration; add a new one.

create table swarm_hosts (
    uuid text primary key not null,
    -- `^[a-z0-9][a-z0-9-]{0,62}$`: the agent certificate's CN.
    name text not null unique,
    -- Where the master dials the agent: empty until the bundle is fetched (the fetcher's address).
    address text not null default '',
    agent_port integer not null,
    -- enrolled | active | unreachable (a row is deleted on decommission, never marked).
    status text not null,
    last_heartbeat integer,
    -- Lowercase hex SHA-256 of each issued leaf's DER; the master pins its peers by them.
    client_cert_fingerprint text,
    updater_cert_fingerprint text,
    enrolled_at integer not null,
    notes text,
    use_ipvlan integer not null default 0
);
create index ix_swarm_hosts_status on swarm_hosts (status);

create table decky_shards (
    decky_name text primary key not null,
    host_uuid text not null references swarm_hosts (uuid) on delete cascade,
    -- A JSON list of service names.
    services text not null,
    -- The decky's DeckyConfig as JSON, from the last dispatch or heartbeat.
    decky_config text,
    decky_ip text,
    -- pending | running | failed | torn_down | degraded | tearing_down | teardown_failed
    state text not null,
    last_error text,
    compose_hash text,
    last_seen integer,
    updated_at integer not null
);
create index ix_decky_shards_host_uuid on decky_shards (host_uuid);
create index ix_decky_shards_state on decky_shards (state);

-- One row per enrollment bundle until its `.tgz` is fetched (the row is then deleted, so a second
-- fetch finds nothing) or it expires. Only the token's SHA-256 is stored: the token itself is the
-- credential, shown once to the operator. Kept here, not in memory, so every API replica serves it.
create table swarm_enrollments (
    token_hash text primary key not null,
    host_uuid text not null references swarm_hosts (uuid) on delete cascade,
    master_host text not null,
    with_updater integer not null,
    services_ini text,
    created_at integer not null,
    expires_at integer not null
);
create index ix_swarm_enrollments_expires_at on swarm_enrollments (expires_at);
