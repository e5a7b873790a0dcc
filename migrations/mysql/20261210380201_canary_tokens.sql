-- Canary tokens (issue 38): the blobs operators upload to make bait from, the tokens (one bait
-- planted in one decky, named by its unguessable callback token) and every callback a token
-- received. Times are Unix milliseconds. A blob is kept whole in the database (it is small: the
-- upload route caps it), named once by its SHA-256, so the same file uploaded twice is one blob.
create table canary_blobs (
    uuid char(36) not null primary key,
    sha256 char(64) not null,
    filename varchar(255) not null,
    content_type varchar(128) not null,
    size_bytes bigint not null,
    uploaded_by varchar(64) not null,
    uploaded_at bigint not null,
    bytes longblob not null,
    unique key canary_blobs_sha256 (sha256)
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;

create table canary_tokens (
    uuid char(36) not null primary key,
    kind varchar(16) not null,
    decky_name varchar(255) not null,
    topology_id varchar(64) null,
    blob_uuid char(36) null,
    instrumenter varchar(64) null,
    generator varchar(32) null,
    placement_path varchar(1024) not null,
    callback_token varchar(63) not null,
    placed_at bigint null,
    last_triggered_at bigint null,
    trigger_count bigint not null default 0,
    created_by varchar(64) not null,
    created_at bigint not null,
    state varchar(16) not null,
    last_error text null,
    unique key canary_tokens_callback (callback_token),
    key canary_tokens_created (created_at),
    key canary_tokens_blob (blob_uuid)
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;

create table canary_triggers (
    uuid char(36) not null primary key,
    token_uuid char(36) not null,
    occurred_at bigint not null,
    src_ip varchar(64) not null,
    user_agent text null,
    method varchar(16) not null,
    request_path text null,
    dns_qname varchar(255) null,
    headers mediumtext not null,
    key canary_triggers_token (token_uuid, occurred_at)
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;
