//! `~/.aws/credentials`: two profiles of keys in AWS's formats, each with `endpoint_url` set to the
//! callback. The AWS CLI and boto3 read a profile's settings from this file as well as from
//! `~/.aws/config` (botocore merges the two), so the first `aws sts get-caller-identity` an attacker
//! runs with these keys is a request to the callback. DECNET's version has no callback at all
//! (passive bait); the keys alone cannot call home.

use super::Input;
use super::people;
use crate::canary::bait::Bait;
use crate::canary::bait::draw::{BASE64ISH, Draw};

/// AWS's key ids: `AKIA` and 16 characters of the base-32 alphabet it uses.
fn access_key_id(draw: &Draw<'_>, profile: &str) -> String {
    format!("AKIA{}", draw.text(&format!("{profile}/id"), b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16))
}

pub(super) fn make(input: &Input<'_>) -> Bait {
    let draw = &input.draw;
    let org = people::org(draw);
    let regions = ["us-east-1", "us-east-2", "us-west-2", "eu-west-1", "eu-central-1"];
    let mut content = String::new();
    for (profile, region_label) in [("default", "region"), (&*format!("{}-prod", org.short), "prod-region")] {
        content.push_str(&format!(
            "[{profile}]\naws_access_key_id = {}\naws_secret_access_key = {}\nregion = {}\nendpoint_url = {}\n\n",
            access_key_id(draw, profile),
            draw.text(&format!("{profile}/secret"), BASE64ISH, 40),
            draw.pick(region_label, &regions),
            input.callback.url(),
        ));
    }
    content.pop();
    Bait { file: input.file(input.path.clone(), 0o600, content.into_bytes(), "text/plain", 14), companions: vec![] }
}
