-- A webhook's signing secret is stored sealed (AES-256-GCM, hex): up to 256 characters of four
-- bytes each, plus nonce and tag, twice over in hex, and the prefix.
alter table webhook_subscriptions modify secret varchar(2200) not null;
