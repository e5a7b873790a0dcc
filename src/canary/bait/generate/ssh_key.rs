//! `~/.ssh/id_ed25519`, a real ed25519 key in OpenSSH's format (so `ssh-keygen` and `ssh` accept
//! it), and the `~/.ssh/config` it is for: a `bastion` host whose `HostName` is the callback's DNS
//! name, through which every internal host jumps. `ssh bastion`, or `ssh` to any host the config
//! names, looks the name up. The key's comment names the same host, as in DECNET (whose key is only
//! base64 noise and whose comment is its only link), so `ssh-keygen -l` shows where it is used.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ring::signature::{Ed25519KeyPair, KeyPair};

use super::people;
use super::{Input, parent};
use crate::canary::bait::Bait;

pub(super) fn make(input: &Input<'_>) -> Bait {
    let draw = &input.draw;
    let org = people::org(draw);
    let user = draw.pick("user", &["deploy", "ops", "ansible", "ci"]);
    let host = input.dns_name();
    let key = private_key(&draw.bytes("ed25519"), &format!("{user}@{host}"), draw.bytes("check"));

    let home = input.persona.home();
    let identity = match input.path.strip_prefix(&format!("{home}/")) {
        Some(relative) => format!("~/{relative}"),
        None => input.path.clone(),
    };
    let config = format!(
        "Host bastion\n    HostName {host}\n    User {user}\n    IdentityFile {identity}\n    IdentitiesOnly yes\n\
         \n\
         Host *.{short}.internal\n    User {user}\n    IdentityFile {identity}\n    ProxyJump bastion\n\
         \n\
         Host *\n    ServerAliveInterval 60\n    AddKeysToAgent yes\n",
        short = org.short,
    );
    // ssh reads only the user's `~/.ssh/config`: beside the key when it is in an `.ssh` folder.
    let key_dir = parent(&input.path);
    let ssh_dir = if key_dir.ends_with("/.ssh") { key_dir.to_string() } else { format!("{home}/.ssh") };
    let config = input.file(format!("{ssh_dir}/config"), 0o600, config.into_bytes(), "text/plain", 60);
    Bait {
        file: input.file(input.path.clone(), 0o600, key.into_bytes(), "application/x-pem-file", 60),
        companions: vec![config],
    }
}

/// An unencrypted `openssh-key-v1` private key (OpenSSH's PROTOCOL.key) for the ed25519 `seed`.
fn private_key(seed: &[u8; 32], comment: &str, check: [u8; 32]) -> String {
    let pair = Ed25519KeyPair::from_seed_unchecked(seed).expect("any 32 bytes are an ed25519 seed");
    let public = pair.public_key().as_ref();
    let mut public_blob = Vec::new();
    put_string(&mut public_blob, b"ssh-ed25519");
    put_string(&mut public_blob, public);

    let mut private = Vec::new();
    // Two equal check words: a decryption with the wrong passphrase shows as a mismatch.
    private.extend_from_slice(&check[..4]);
    private.extend_from_slice(&check[..4]);
    put_string(&mut private, b"ssh-ed25519");
    put_string(&mut private, public);
    put_string(&mut private, &[&seed[..], public].concat());
    put_string(&mut private, comment.as_bytes());
    // Padded 1, 2, 3… to the cipher's block size, 8 for "none".
    let mut pad = 1u8;
    while private.len() % 8 != 0 {
        private.push(pad);
        pad += 1;
    }

    let mut blob = b"openssh-key-v1\0".to_vec();
    put_string(&mut blob, b"none");
    put_string(&mut blob, b"none");
    put_string(&mut blob, b"");
    blob.extend_from_slice(&1u32.to_be_bytes());
    put_string(&mut blob, &public_blob);
    put_string(&mut blob, &private);

    let encoded = STANDARD.encode(blob);
    let mut pem = String::from("-----BEGIN OPENSSH PRIVATE KEY-----\n");
    for line in encoded.as_bytes().chunks(70) {
        pem.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
        pem.push('\n');
    }
    pem.push_str("-----END OPENSSH PRIVATE KEY-----\n");
    pem
}

fn put_string(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(bytes);
}
