-- The fleet: the network its deckies share, and each decky as deployed (DECNET's DeckyConfig as
-- JSON, with the state of its last deploy). One store; DECNET kept three that disagreed.

create table fleet_network (
    id int not null primary key,
    subnet varchar(18) not null,
    gateway varchar(15) not null,
    interface varchar(15) null,
    driver varchar(16) not null,
    updated_at bigint not null
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;

create table fleet_deckies (
    name varchar(64) not null primary key,
    host_uuid char(36) null,
    ip varchar(15) not null,
    config mediumtext not null,
    state varchar(16) not null default 'pending',
    last_error text null,
    created_at bigint not null,
    updated_at bigint not null,
    unique key uq_fleet_deckies_ip (ip),
    key ix_fleet_deckies_state (state)
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;
