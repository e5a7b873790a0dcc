-- The realism settings operators tune on DECNET's Realism pages (issue 38): the planner's content
-- class weights, the global persona pool and the LLM provider, one row per setting, its value a
-- JSON text. `secret` holds what must not be readable from the database alone (the LLM provider's
-- API key), sealed like a webhook's signing secret.
create table realism_settings (
    setting_key varchar(32) not null primary key,
    value mediumtext not null,
    secret text null,
    updated_at bigint not null
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;
