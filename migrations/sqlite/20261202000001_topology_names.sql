-- Topology names, and LAN names within a topology, are unique exactly as written (byte for byte):
-- sqlite's unique keys on text already compare so (collation BINARY); the MySQL migration of the
-- same name makes MySQL/MariaDB do the same. Nothing changes here.
select 1;
