-- Canary tokens (issue 38): the blobs operators upload to make bait from, the tokens (one bait
-- planted in one decky, named by its unguessable callback token) and every callback a token
-- received. Times are Unix milliseconds. A blob is kept whole in the database (it is small: the
-- upload route caps it), named once by its SHA-256, so the same file uploaded twice is one blob.
create table canary_blobs (
    uuid text primary key,
    sha256 text not null unique,
    filename text not null,
    content_type text not null,
    size_bytes integer not null,
    uploaded_by text not null,
    uploaded_at integer not null,
    bytes blob not null
);

create table canary_tokens (
    uuid text primary key,
    kind text not null,
    decky_name text not null,
    topology_id text,
    blob_uuid text,
    instrumenter text,
    generator text,
    placement_path text not null,
    callback_token text not null unique,
    placed_at integer,
    last_triggered_at integer,
    trigger_count integer not null default 0,
    created_by text not null,
    created_at integer not null,
    state text not null,
    last_error text
);
create index canary_tokens_created on canary_tokens (created_at);
create index canary_tokens_blob on canary_tokens (blob_uuid);

create table canary_triggers (
    uuid text primary key,
    token_uuid text not null,
    occurred_at integer not null,
    src_ip text not null,
    user_agent text,
    method text not null,
    request_path text,
    dns_qname text,
    headers text not null
);
create index canary_triggers_token on canary_triggers (token_uuid, occurred_at);
