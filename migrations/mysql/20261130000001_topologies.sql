-- Topologies (DECNET's MazeNET): decoy networks of several LANs with deckies bridging them, their
-- status history, and the mutations queued against them. Times are epoch milliseconds (UTC).
-- Never edit an applied migration; add a new one.

create table topologies (
    id char(36) not null primary key,
    name varchar(64) not null,
    mode varchar(16) not null default 'unihost',
    target_host_uuid char(36) null,
    -- The generator's parameters and seed (JSON), so a topology says how it was made.
    config_snapshot mediumtext not null,
    status varchar(32) not null default 'pending',
    status_changed_at bigint not null,
    created_at bigint not null,
    -- Optimistic lock: every change bumps it; a writer naming an older one is refused.
    version bigint not null default 1,
    needs_resync boolean not null default false,
    email_personas mediumtext not null,
    language_default varchar(8) not null default 'en',
    unique key ix_topologies_name (name),
    key ix_topologies_status (status)
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;

create table topology_lans (
    id char(36) not null primary key,
    topology_id char(36) not null,
    name varchar(64) not null,
    subnet varchar(18) not null,
    is_dmz boolean not null default false,
    docker_network_id varchar(255) null,
    x double null,
    y double null,
    unique key uq_lan_topology_name (topology_id, name),
    constraint fk_topology_lans_topology foreign key (topology_id) references topologies (id) on delete cascade
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;

create table topology_deckies (
    uuid char(36) not null primary key,
    topology_id char(36) not null,
    name varchar(64) not null,
    services mediumtext not null,
    decky_config mediumtext null,
    ip varchar(15) null,
    state varchar(32) not null default 'pending',
    last_error text null,
    updated_at bigint not null,
    x double null,
    y double null,
    unique key uq_topology_decky_name (topology_id, name),
    constraint fk_topology_deckies_topology foreign key (topology_id) references topologies (id) on delete cascade
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;

create table topology_edges (
    id char(36) not null primary key,
    topology_id char(36) not null,
    decky_uuid char(36) not null,
    lan_id char(36) not null,
    ip varchar(15) null,
    is_bridge boolean not null default false,
    forwards_l3 boolean not null default false,
    unique key uq_topology_edge (decky_uuid, lan_id),
    constraint fk_topology_edges_topology foreign key (topology_id) references topologies (id) on delete cascade,
    constraint fk_topology_edges_decky foreign key (decky_uuid) references topology_deckies (uuid) on delete cascade,
    constraint fk_topology_edges_lan foreign key (lan_id) references topology_lans (id) on delete cascade
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;

create table topology_status_events (
    id char(36) not null primary key,
    topology_id char(36) not null,
    from_status varchar(32) not null,
    to_status varchar(32) not null,
    at bigint not null,
    reason text null,
    key ix_topology_status_events_topology_at (topology_id, at),
    constraint fk_topology_status_events_topology foreign key (topology_id) references topologies (id) on delete cascade
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;

create table topology_mutations (
    id char(36) not null primary key,
    topology_id char(36) not null,
    -- The topology's version this mutation made: orders a topology's queue within one millisecond.
    seq bigint not null,
    op varchar(32) not null,
    payload mediumtext not null,
    state varchar(32) not null default 'pending',
    requested_at bigint not null,
    -- When and by whom it was claimed; an `applying` row whose claim is old was left by a dead mutator.
    claimed_at bigint null,
    claimed_by varchar(128) null,
    applied_at bigint null,
    reason text null,
    key ix_topology_mutations_state_topology (state, topology_id),
    constraint fk_topology_mutations_topology foreign key (topology_id) references topologies (id) on delete cascade
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;
