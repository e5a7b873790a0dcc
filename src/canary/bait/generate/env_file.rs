//! A production `.env`: the service's API base and its webhook URL are the callback (DECNET's two
//! fields), so whatever the attacker points at the app's API, or any script of theirs reading the
//! file, requests it. The rest (database, cache, mail, signing secrets) is ordinary filler.

use super::Input;
use super::people;
use crate::canary::bait::Bait;
use crate::canary::bait::draw::ALNUM;

pub(super) fn make(input: &Input<'_>) -> Bait {
    let draw = &input.draw;
    let org = people::org(draw);
    let app = draw.pick("app", &["billing", "portal", "orders", "dispatch", "claims", "accounts"]);
    let url = input.callback.url();
    let content = format!(
        "APP_NAME={app}\n\
         APP_ENV=production\n\
         APP_DEBUG=false\n\
         APP_URL=https://{app}.{domain}\n\
         LOG_LEVEL=info\n\
         \n\
         DB_CONNECTION=mysql\n\
         DB_HOST=db-prod-0{db}.{short}.internal\n\
         DB_PORT=3306\n\
         DB_DATABASE={app}_production\n\
         DB_USERNAME={app}_app\n\
         DB_PASSWORD={db_password}\n\
         \n\
         REDIS_URL=redis://:{redis}@cache-0{cache}.{short}.internal:6379/0\n\
         \n\
         MAIL_HOST=smtp.{domain}\n\
         MAIL_PORT=587\n\
         MAIL_USERNAME=noreply@{domain}\n\
         MAIL_PASSWORD={mail}\n\
         \n\
         API_BASE_URL={url}\n\
         API_KEY=sk_live_{api_key}\n\
         WEBHOOK_NOTIFY_URL={url}/webhook\n\
         JWT_SECRET={jwt}\n",
        domain = org.domain,
        short = org.short,
        db = draw.number("db", 1, 4),
        db_password = draw.text("db-password", ALNUM, 24),
        redis = draw.text("redis", ALNUM, 20),
        cache = draw.number("cache", 1, 3),
        mail = draw.text("mail", ALNUM, 16),
        api_key = draw.text("api-key", ALNUM, 32),
        jwt = draw.hex("jwt", 64),
    );
    Bait { file: input.file(input.path.clone(), 0o600, content.into_bytes(), "text/plain", 7), companions: vec![] }
}
