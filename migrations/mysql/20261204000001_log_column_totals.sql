-- Rows stored per ingest source and exact-match search value (`service:ssh`): the total of a
-- one-column search is the sum of its rows here, with no count over the logs. Bumped in the
-- transaction that stores the rows. Same table as the sqlite migration of the same name.
--
-- `column_value` is declared as the logs' own columns are (varchar(255), the table's
-- utf8mb4_unicode_ci), so it compares as `where service = ?` on the logs does: values that search
-- finds as one (letter case, trailing spaces) share a counter row. The search looks a value up in
-- every source, so the key starts with the column and the value; one row per source still, so
-- ingesters of different sources never wait on one counter row.
create table log_column_totals (
    -- The logs' column: decky, service, event_type or attacker_ip.
    column_name varchar(32) not null,
    column_value varchar(255) not null,
    source varchar(255) collate utf8mb4_bin not null,
    total bigint not null,
    primary key (column_name, column_value, source)
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;

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
