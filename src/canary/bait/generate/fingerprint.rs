//! The pages that report who opened them: an internal asset directory (HTML) and a network diagram
//! (SVG), each with a script that requests the callback with a few facts of the browser (screen,
//! time zone, language, platform) as query parameters, and a plain image of the callback for when
//! scripts do not run (HTML `<noscript>`; an SVG shown as an image runs no script but may fetch). An
//! SVG's script runs when the file is opened as a document, as a browser does on a double click.
//! DECNET's versions carry a large obfuscated fingerprinting script instead; this one is plain.

use super::Input;
use super::people;
use crate::canary::bait::Bait;
use crate::text::markup_escape;

/// The beacon. The callback URL has no quote, backslash or angle bracket (`Callback::new` refuses
/// them), so it sits in a JavaScript string, in HTML and in XML CDATA as it is.
fn beacon_script(url: &str) -> String {
    format!(
        "(function(){{var u=\"{url}\",n=navigator,q;try{{q=\"?sw=\"+screen.width+\"&sh=\"+screen.height+\
         \"&tz=\"+encodeURIComponent(Intl.DateTimeFormat().resolvedOptions().timeZone)+\
         \"&lang=\"+encodeURIComponent(n.language)+\"&pf=\"+encodeURIComponent(n.platform)}}catch(e){{q=\"\"}}\
         (new Image()).src=u+q}})();"
    )
}

const ROLES: &[(&str, &str, &str)] = &[
    ("app", "application server", "vlan20"),
    ("db", "postgres primary", "vlan30"),
    ("build", "ci runner", "vlan40"),
    ("vpn", "wireguard endpoint", "vlan10"),
    ("mail", "mail relay", "vlan50"),
    ("cache", "redis replica", "vlan30"),
    ("bastion", "ssh jump host", "vlan10"),
    ("backup", "backup target", "vlan70"),
    ("mon", "monitoring", "vlan60"),
];
const SITES: &[&str] = &["nyc", "fra", "lon", "sfo", "sin", "ams"];

pub(super) fn make_html(input: &Input<'_>) -> Bait {
    let draw = &input.draw;
    let org = people::org(draw);
    let count = draw.number("rows", 6, ROLES.len() as u64) as usize;
    let first = draw.number("first", 0, ROLES.len() as u64 - 1) as usize;
    let mut rows = String::new();
    for at in 0..count {
        let (role, what, vlan) = ROLES[(first + at) % ROLES.len()];
        let label = format!("row{at}");
        let owner = people::person(draw, &label).login();
        rows.push_str(&format!(
            "<tr><td>{}-{role}-{:02}.{}.internal</td><td>10.{}.{}.{}</td><td>{owner}</td><td>{what}</td><td>{vlan}</td></tr>\n",
            draw.pick(&format!("{label}/site"), SITES),
            draw.number(&format!("{label}/n"), 1, 12),
            org.short,
            draw.number("net", 10, 40),
            &vlan[4..],
            draw.number(&format!("{label}/host"), 10, 250),
        ));
    }
    let (year, month, day) = draw.date("synced", 2025);
    let url = input.callback.url();
    let content = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>Asset directory - {org}</title>\n\
         <style>body{{font-family:Segoe UI,Arial,sans-serif;margin:24px;font-size:13px;color:#222}}\
         table{{border-collapse:collapse;width:100%}}th,td{{padding:6px 10px;border-bottom:1px solid #e4e4e4;\
         text-align:left}}th{{background:#f4f4f4;font-size:11px;text-transform:uppercase}}\
         .sub{{color:#777;font-size:11px}}</style>\n</head>\n<body>\n<h1>Asset directory</h1>\n\
         <p class=\"sub\">Exported {year}-{month:02}-{day:02} from the CMDB, {count} entries. Internal use only.</p>\n\
         <table>\n<tr><th>Host</th><th>Address</th><th>Owner</th><th>Role</th><th>VLAN</th></tr>\n{rows}</table>\n\
         <script>{script}</script>\n\
         <noscript><img src=\"{image}\" width=\"1\" height=\"1\" alt=\"\"></noscript>\n</body>\n</html>\n",
        org = markup_escape(org.name),
        script = beacon_script(url),
        image = markup_escape(url),
    );
    Bait {
        file: input.file(input.path.clone(), 0o644, content.into_bytes(), "text/html; charset=utf-8", 14),
        companions: vec![],
    }
}

pub(super) fn make_svg(input: &Input<'_>) -> Bait {
    let draw = &input.draw;
    let org = people::org(draw);
    let site = draw.pick("site", SITES);
    let (year, month, day) = draw.date("reviewed", 2025);
    let boxes = [(40, 80, "edge firewall"), (240, 80, "core switch"), (440, 80, "app cluster"), (240, 220, "db tier")];
    let mut shapes = String::new();
    for (x, y, name) in boxes {
        shapes.push_str(&format!(
            "<rect class=\"box\" x=\"{x}\" y=\"{y}\" width=\"120\" height=\"50\" rx=\"4\"/>\n\
             <text class=\"label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{name}</text>\n",
            x + 60,
            y + 30
        ));
    }
    let url = input.callback.url();
    let content = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <svg xmlns=\"http://www.w3.org/2000/svg\" xmlns:xlink=\"http://www.w3.org/1999/xlink\" \
         viewBox=\"0 0 600 320\" width=\"600\" height=\"320\">\n\
         <style>.box{{fill:#f7f9fb;stroke:#7a93ad}}.label{{font:12px Segoe UI,Arial,sans-serif;fill:#2a3a4a}}\
         .edge{{stroke:#7a93ad;fill:none}}.title{{font:bold 14px Segoe UI,Arial,sans-serif}}\
         .caption{{font:10px Segoe UI,Arial,sans-serif;fill:#6a7a8a}}</style>\n\
         <text class=\"title\" x=\"20\" y=\"28\">{org} - {site} network, production segment</text>\n\
         <text class=\"caption\" x=\"20\" y=\"44\">rev {rev}, reviewed {year}-{month:02}-{day:02}</text>\n\
         {shapes}\
         <path class=\"edge\" d=\"M160 105 L240 105\"/>\n<path class=\"edge\" d=\"M360 105 L440 105\"/>\n\
         <path class=\"edge\" d=\"M300 130 L300 220\"/>\n\
         <image href=\"{image}\" xlink:href=\"{image}\" x=\"0\" y=\"0\" width=\"1\" height=\"1\"/>\n\
         <script type=\"application/ecmascript\"><![CDATA[\n{script}\n]]></script>\n</svg>\n",
        org = markup_escape(org.name),
        rev = draw.number("revision", 2, 9),
        image = markup_escape(url),
        script = beacon_script(url),
    );
    Bait { file: input.file(input.path.clone(), 0o644, content.into_bytes(), "image/svg+xml", 30), companions: vec![] }
}
