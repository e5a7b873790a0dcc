-- What the bytes before the cursor looked like (a hash of the file's first block and of the block
-- before the offset): a file truncated and grown back past the offset, or a new file on a reused
-- inode, no longer matches, and is read from its start. Empty for cursors stored before it.
alter table ingest_cursors add column fingerprint text not null default '';
