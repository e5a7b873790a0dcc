-- Rows stored per ingest source and exact-match search value (`service:ssh`): the total of a
-- one-column search is the sum of its rows here, with no count over the logs. Bumped in the
-- transaction that stores the rows. Same table as the MySQL migration of the same name.
--
-- `column_value` compares byte for byte, as the logs' columns do. The search looks a value up in
-- every source, so the key starts with the column and the value; one row per source still, as in
-- `log_totals`.
create table log_column_totals (
    -- The logs' column: decky, service, event_type or attacker_ip.
    column_name text not null,
    column_value text not null,
    source text not null,
    total integer not null,
    primary key (column_name, column_value, source)
) without rowid;

-- The rows stored before this table. A log row does not record its source: they count under the
-- empty source, which no ingester uses (a total is the sum over sources either way).
insert into log_column_totals (column_name, column_value, source, total)
    select 'decky', decky, '', count(*) from logs group by decky;
insert into log_column_totals (column_name, column_value, source, total)
    select 'service', service, '', count(*) from logs group by service;
insert into log_column_totals (column_name, column_value, source, total)
    select 'event_type', event_type, '', count(*) from logs group by event_type;
insert into log_column_totals (column_name, column_value, source, total)
    select 'attacker_ip', attacker_ip, '', count(*) from logs group by attacker_ip;
