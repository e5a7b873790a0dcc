-- Topology names, and LAN names within a topology, are unique exactly as written (byte for byte),
-- as sqlite compares them: `Maze` and `maze`, `maze` and `maze `, `é` and `e` are different names.
-- The columns' collation (utf8mb4_unicode_ci: case- and accent-insensitive, trailing spaces
-- ignored) made such pairs one name on MySQL/MariaDB only; byte keys replace those unique keys.
-- Never edit an applied migration; add a new one.

alter table topologies
    add column name_key varbinary(256) generated always as (cast(name as binary)) stored,
    drop index ix_topologies_name,
    add unique key uq_topologies_name_key (name_key);

alter table topology_lans
    add column name_key varbinary(256) generated always as (cast(name as binary)) stored,
    add unique key uq_lan_topology_name_key (topology_id, name_key),
    drop index uq_lan_topology_name;
