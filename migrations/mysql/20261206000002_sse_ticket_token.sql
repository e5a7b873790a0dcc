-- A stream ticket remembers the token it was minted with, so a stream opened by the ticket ends
-- when that token is logged out or expires, as a stream opened by the token itself does.

alter table sse_tickets add column token_jti varchar(64) null, add column token_expires_at bigint null;
