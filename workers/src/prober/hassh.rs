//! HASSH-server: the MD5 of the SSH server's algorithm offer as its KEXINIT states it
//! (`kex;encryption s→c;mac s→c;compression s→c`, each list comma-joined as sent), with the
//! server's banner. Read over a connection the prober already holds: the server speaks first
//! (its banner), we answer with ours and read its first binary packet, which is the KEXINIT.

use std::time::Duration;

use md5::{Digest, Md5};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What the prober tells the server it is.
const OUR_BANNER: &[u8] = b"SSH-2.0-OpenSSH_9.2p1\r\n";
/// RFC 4253: a banner line is at most 255 bytes; lines before it are allowed, a few are read.
const MAX_LINE: usize = 255;
const MAX_PRE_BANNER_LINES: usize = 16;
/// RFC 4253 §6.1: implementations must take packets of 35000 bytes.
const MAX_PACKET: usize = 35_000;
const SSH_MSG_KEXINIT: u8 = 20;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerKex {
    pub banner: String,
    pub kex_algorithms: String,
    pub encryption_s2c: String,
    pub mac_s2c: String,
    pub compression_s2c: String,
}

impl ServerKex {
    /// The HASSH-server string.
    pub fn hassh_server_raw(&self) -> String {
        format!("{};{};{};{}", self.kex_algorithms, self.encryption_s2c, self.mac_s2c, self.compression_s2c)
    }

    pub fn hassh_server(&self) -> String {
        svc::text::hex(&Md5::digest(self.hassh_server_raw().as_bytes()))
    }
}

/// The server's banner, or `None` when the first line within `wait` is not one (not SSH).
pub async fn read_banner(stream: &mut TcpStream, wait: Duration) -> Option<String> {
    tokio::time::timeout(wait, async {
        for _ in 0..MAX_PRE_BANNER_LINES {
            let line = read_line(stream).await?;
            if line.starts_with("SSH-") {
                return Some(line);
            }
        }
        None
    })
    .await
    .ok()
    .flatten()
}

async fn read_line(stream: &mut TcpStream) -> Option<String> {
    let mut line = Vec::new();
    loop {
        let byte = stream.read_u8().await.ok()?;
        if byte == b'\n' {
            break;
        }
        if line.len() >= MAX_LINE {
            return None;
        }
        line.push(byte);
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Some(String::from_utf8_lossy(&line).into_owned())
}

/// After the banner: sends ours and reads the server's KEXINIT, within `wait`.
pub async fn read_kexinit(stream: &mut TcpStream, banner: String, wait: Duration) -> Option<ServerKex> {
    tokio::time::timeout(wait, async {
        stream.write_all(OUR_BANNER).await.ok()?;
        let length = stream.read_u32().await.ok()? as usize;
        if !(2..=MAX_PACKET).contains(&length) {
            return None;
        }
        let mut packet = vec![0u8; length];
        stream.read_exact(&mut packet).await.ok()?;
        let padding = usize::from(packet[0]);
        let payload = packet.get(1..length.checked_sub(padding)?)?;
        parse_kexinit(payload, banner)
    })
    .await
    .ok()
    .flatten()
}

/// A KEXINIT payload (message number, cookie, ten name-lists, …).
pub fn parse_kexinit(payload: &[u8], banner: String) -> Option<ServerKex> {
    if payload.first() != Some(&SSH_MSG_KEXINIT) {
        return None;
    }
    let mut rest = payload.get(17..)?;
    let mut lists = Vec::with_capacity(10);
    for _ in 0..10 {
        let length = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
        let list = rest.get(4..4 + length)?;
        lists.push(String::from_utf8_lossy(list).into_owned());
        rest = &rest[4 + length..];
    }
    // kex, host key, enc c→s, enc s→c, mac c→s, mac s→c, comp c→s, comp s→c, languages.
    Some(ServerKex {
        banner,
        kex_algorithms: lists[0].clone(),
        encryption_s2c: lists[3].clone(),
        mac_s2c: lists[5].clone(),
        compression_s2c: lists[7].clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name_list(out: &mut Vec<u8>, list: &str) {
        out.extend_from_slice(&(list.len() as u32).to_be_bytes());
        out.extend_from_slice(list.as_bytes());
    }

    #[test]
    fn hassh_server_is_the_md5_of_the_server_to_client_lists() {
        let mut payload = vec![SSH_MSG_KEXINIT];
        payload.extend_from_slice(&[7; 16]);
        for list in ["curve25519-sha256,ext-info-s", "ssh-ed25519", "aes128-ctr", "aes256-gcm@openssh.com", "hmac-sha1"]
        {
            name_list(&mut payload, list);
        }
        for list in ["hmac-sha2-256", "none", "none,zlib@openssh.com", "", ""] {
            name_list(&mut payload, list);
        }
        payload.extend_from_slice(&[0, 0, 0, 0, 0]);
        let kex = parse_kexinit(&payload, "SSH-2.0-x".into()).unwrap();
        assert_eq!(
            kex.hassh_server_raw(),
            "curve25519-sha256,ext-info-s;aes256-gcm@openssh.com;hmac-sha2-256;none,zlib@openssh.com"
        );
        assert_eq!(parse_kexinit(&payload[..40], String::new()), None, "a cut packet is not read");
        assert_eq!(parse_kexinit(&[21], String::new()), None);
    }
}
