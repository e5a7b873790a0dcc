-- The threat-intel exports and the TAXII collection walk the profiles in the order they last
-- changed (then uuid, which breaks ties): one index walk per page, whatever the fleet's size.
create index ix_attackers_changed on attackers (updated_at, uuid);
