-- The fleet: the network its deckies share, and each decky as deployed (DECNET's DeckyConfig as
-- JSON, with the state of its last deploy). One store; DECNET kept three that disagreed.

create table fleet_network (
    id integer primary key not null check (id = 1),
    subnet text not null,
    gateway text not null,
    interface text,
    driver text not null,
    updated_at integer not null
);

create table fleet_deckies (
    name text primary key not null,
    host_uuid text,
    ip text not null unique,
    config text not null,
    state text not null default 'pending',
    last_error text,
    created_at integer not null,
    updated_at integer not null
);
create index ix_fleet_deckies_state on fleet_deckies (state);
