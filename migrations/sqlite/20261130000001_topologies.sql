-- Topologies (DECNET's MazeNET): decoy networks of several LANs with deckies bridging them, their
-- status history, and the mutations queued against them. Times are epoch milliseconds (UTC).
-- Never edit an applied migration; add a new one.

create table topologies (
    id text primary key not null,
    name text not null unique,
    mode text not null default 'unihost',
    target_host_uuid text,
    -- The generator's parameters and seed (JSON), so a topology says how it was made.
    config_snapshot text not null default '{}',
    status text not null default 'pending',
    status_changed_at integer not null,
    created_at integer not null,
    -- Optimistic lock: every change bumps it; a writer naming an older one is refused.
    version integer not null default 1,
    needs_resync integer not null default 0,
    email_personas text not null default '[]',
    language_default text not null default 'en'
);
create index ix_topologies_status on topologies (status);

create table topology_lans (
    id text primary key not null,
    topology_id text not null references topologies (id) on delete cascade,
    name text not null,
    subnet text not null,
    is_dmz integer not null default 0,
    docker_network_id text,
    x real,
    y real,
    unique (topology_id, name)
);

create table topology_deckies (
    uuid text primary key not null,
    topology_id text not null references topologies (id) on delete cascade,
    name text not null,
    services text not null,
    decky_config text,
    ip text,
    state text not null default 'pending',
    last_error text,
    updated_at integer not null,
    x real,
    y real,
    unique (topology_id, name)
);

create table topology_edges (
    id text primary key not null,
    topology_id text not null references topologies (id) on delete cascade,
    decky_uuid text not null references topology_deckies (uuid) on delete cascade,
    lan_id text not null references topology_lans (id) on delete cascade,
    ip text,
    is_bridge integer not null default 0,
    forwards_l3 integer not null default 0,
    unique (decky_uuid, lan_id)
);

create table topology_status_events (
    id text primary key not null,
    topology_id text not null references topologies (id) on delete cascade,
    from_status text not null,
    to_status text not null,
    at integer not null,
    reason text
);
create index ix_topology_status_events_topology_at on topology_status_events (topology_id, at);

create table topology_mutations (
    id text primary key not null,
    topology_id text not null references topologies (id) on delete cascade,
    -- The topology's version this mutation made: orders a topology's queue within one millisecond.
    seq integer not null,
    op text not null,
    payload text not null,
    state text not null default 'pending',
    requested_at integer not null,
    -- When and by whom it was claimed; an `applying` row whose claim is old was left by a dead mutator.
    claimed_at integer,
    claimed_by text,
    applied_at integer,
    reason text
);
create index ix_topology_mutations_state_topology on topology_mutations (state, topology_id);
