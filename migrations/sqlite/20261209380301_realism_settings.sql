-- The realism settings operators tune on DECNET's Realism pages (issue 38): the planner's content
-- class weights, the global persona pool and the LLM provider, one row per setting, its value a
-- JSON text. `secret` holds what must not be readable from the database alone (the LLM provider's
-- API key), sealed like a webhook's signing secret.
create table realism_settings (
    setting_key text primary key,
    value text not null,
    secret text,
    updated_at integer not null
);
