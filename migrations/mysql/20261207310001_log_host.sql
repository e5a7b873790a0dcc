-- Which swarm host a log line came from (its uuid), for lines shipped by a host's forwarder;
-- null for lines ingested from this host's own file.
alter table logs add column host_uuid varchar(36) null;
