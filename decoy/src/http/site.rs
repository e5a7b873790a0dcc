//! What the web decoy shows: a login page, a `robots.txt`, and Apache's own error pages for the
//! paths scanners probe (403 for the admin areas, a Basic challenge for phpMyAdmin, 404 for the
//! rest), each with the configured `Server` header. Pages are fixed text; nothing a request holds
//! is shown back except the method name of a 405, escaped.

use hyper::body::Bytes;
use hyper::header::{ALLOW, CACHE_CONTROL, CONTENT_TYPE, HeaderValue, SERVER, WWW_AUTHENTICATE};
use hyper::{Method, Response, StatusCode};

use http_body_util::Full;
use svc_core::text::markup_escape;

/// The `Server` header when the `banner` setting names none.
pub const DEFAULT_SERVER: &str = "Apache/2.4.52 (Ubuntu)";

/// What a path is on this site.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// The login page; `posts` when a form posted here is a login attempt.
    Login {
        posts: bool,
    },
    Robots,
    /// Denied whoever asks.
    Forbidden,
    /// Behind HTTP Basic authentication, in this realm.
    Protected(&'static str),
    NotFound,
}

/// Where each path leads. Apache on Linux matches paths case-sensitively; phpMyAdmin's aliases
/// are commonly written in either case.
pub fn route(path: &str) -> Route {
    let under = |prefix: &str| path == prefix || path.starts_with(&format!("{prefix}/"));
    match path {
        "/" | "/index.html" | "/index.php" => Route::Login { posts: false },
        "/login" | "/login/" | "/wp-login.php" => Route::Login { posts: true },
        "/robots.txt" => Route::Robots,
        _ if under("/admin") || under("/server-status") || path.starts_with("/.ht") => Route::Forbidden,
        _ if path.to_ascii_lowercase().starts_with("/phpmyadmin") || under("/pma") => Route::Protected("phpMyAdmin"),
        _ => Route::NotFound,
    }
}

/// The site one decoy serves: its name (page titles, certificate, error pages) and `Server` header.
pub struct Site {
    name: String,
    server: String,
}

pub type Page = Response<Full<Bytes>>;

impl Site {
    pub fn new(name: &str, server: &str) -> Site {
        Site { name: name.to_string(), server: server.to_string() }
    }

    /// The answer to `method` on `route`; `failed_login` adds the error line to the login page.
    /// `port` is the one the request came in on, as Apache's error pages name it.
    pub fn answer(&self, method: &Method, route: Route, failed_login: bool, port: u16) -> Page {
        match *method {
            Method::GET | Method::HEAD | Method::POST => {}
            Method::OPTIONS => {
                let mut page = self.page(StatusCode::OK, "text/html", String::new());
                page.headers_mut().insert(ALLOW, HeaderValue::from_static("GET,POST,OPTIONS,HEAD"));
                return page;
            }
            _ => {
                let text =
                    format!("The requested method {} is not allowed for this URL.", markup_escape(method.as_str()));
                let mut page = self.error(StatusCode::METHOD_NOT_ALLOWED, &text, port);
                page.headers_mut().insert(ALLOW, HeaderValue::from_static("GET,POST,OPTIONS,HEAD"));
                return page;
            }
        }
        match route {
            Route::Login { .. } => {
                let mut page = self.page(StatusCode::OK, "text/html; charset=UTF-8", self.login_page(failed_login));
                page.headers_mut()
                    .insert(CACHE_CONTROL, HeaderValue::from_static("no-store, no-cache, must-revalidate"));
                page
            }
            Route::Robots => self.page(StatusCode::OK, "text/plain", ROBOTS.to_string()),
            Route::Forbidden => {
                self.error(StatusCode::FORBIDDEN, "You don't have permission to access this resource.", port)
            }
            Route::Protected(realm) => {
                let mut page = self.error(StatusCode::UNAUTHORIZED, UNAUTHORIZED, port);
                if let Ok(challenge) = HeaderValue::from_str(&format!("Basic realm=\"{realm}\"")) {
                    page.headers_mut().insert(WWW_AUTHENTICATE, challenge);
                }
                page
            }
            Route::NotFound => {
                self.error(StatusCode::NOT_FOUND, "The requested URL was not found on this server.", port)
            }
        }
    }

    /// Apache's page for `status`, with `text` as its paragraph.
    pub fn error(&self, status: StatusCode, text: &str, port: u16) -> Page {
        let reason = status.canonical_reason().unwrap_or("Error");
        let body = format!(
            "<!DOCTYPE HTML PUBLIC \"-//IETF//DTD HTML 2.0//EN\">\n<html><head>\n<title>{code} {reason}</title>\n\
             </head><body>\n<h1>{reason}</h1>\n<p>{text}</p>\n<hr>\n<address>{server} Server at {name} Port {port}</address>\n\
             </body></html>\n",
            code = status.as_u16(),
            server = markup_escape(&self.server),
            name = markup_escape(&self.name),
        );
        self.page(status, "text/html; charset=iso-8859-1", body)
    }

    fn page(&self, status: StatusCode, content_type: &'static str, body: String) -> Page {
        let mut page = Response::new(Full::new(Bytes::from(body)));
        *page.status_mut() = status;
        let headers = page.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
        if let Ok(server) = HeaderValue::from_str(&self.server) {
            headers.insert(SERVER, server);
        }
        page
    }

    fn login_page(&self, failed: bool) -> String {
        let error = if failed { "<p class=\"error\">Invalid username or password.</p>\n" } else { "" };
        LOGIN_PAGE.replace("{name}", &markup_escape(&self.name)).replace("{error}", error)
    }
}

const ROBOTS: &str = "User-agent: *\nDisallow: /admin/\nDisallow: /backup/\nDisallow: /login\n";

const UNAUTHORIZED: &str = "This server could not verify that you\nare authorized to access the document\n\
    requested.  Either you supplied the wrong\ncredentials (e.g., bad password), or your\nbrowser doesn't \
    understand how to supply\nthe credentials required.";

const LOGIN_PAGE: &str = r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in &middot; {name}</title>
<style>
body{margin:0;background:#eef1f5;font-family:"Segoe UI",Helvetica,Arial,sans-serif;color:#222}
.box{max-width:340px;margin:12vh auto;padding:32px;background:#fff;border-radius:6px;box-shadow:0 1px 4px rgba(0,0,0,.15)}
h1{font-size:20px;margin:0 0 4px}
.sub{color:#666;margin:0 0 20px;font-size:14px}
label{display:block;font-size:13px;margin:12px 0 4px}
input{width:100%;box-sizing:border-box;padding:8px;border:1px solid #bbb;border-radius:4px}
button{margin-top:20px;width:100%;padding:9px;border:0;border-radius:4px;background:#1f5fa8;color:#fff;font-size:14px}
.error{color:#b00020;font-size:13px}
.foot{margin-top:24px;font-size:12px;color:#888;text-align:center}
</style>
</head>
<body>
<main class="box">
<h1>{name}</h1>
<p class="sub">Sign in with your company account</p>
{error}<form method="post" action="/login">
<label for="username">Username</label>
<input id="username" name="username" type="text" autocomplete="username" required autofocus>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required>
<button type="submit">Sign in</button>
</form>
<p class="foot">&copy; IT Services &middot; <a href="/login">Forgot your password?</a></p>
</main>
</body>
</html>
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_paths() {
        assert_eq!(route("/"), Route::Login { posts: false });
        assert_eq!(route("/wp-login.php"), Route::Login { posts: true });
        assert_eq!(route("/robots.txt"), Route::Robots);
        assert_eq!(route("/admin"), Route::Forbidden);
        assert_eq!(route("/admin/config.php"), Route::Forbidden);
        assert_eq!(route("/administrator"), Route::NotFound);
        assert_eq!(route("/.htaccess"), Route::Forbidden);
        assert_eq!(route("/phpMyAdmin/index.php"), Route::Protected("phpMyAdmin"));
        assert_eq!(route("/.env"), Route::NotFound);
        assert_eq!(route("/.git/config"), Route::NotFound);
    }

    #[test]
    fn names_are_escaped_into_pages() {
        let site = Site::new("<x>", DEFAULT_SERVER);
        let page = site.login_page(true);
        assert!(page.contains("<h1>&lt;x&gt;</h1>"));
        assert!(page.contains("Invalid username or password."));
        assert!(page.contains(r#"<input id="password" name="password" type="password""#));
        let page = site.answer(&Method::from_bytes(b"PUT").unwrap(), Route::NotFound, false, 80);
        assert_eq!(page.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(page.headers()[SERVER], DEFAULT_SERVER);
    }
}
