-- Each heartbeat of a swarm host reads the live topologies targeted at it: an index, so that
-- costs the host's own rows, not a scan of every topology.
create index ix_topologies_target_host on topologies (target_host_uuid, status);
