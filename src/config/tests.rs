//! The configuration's rules, through the public entry points: every default, every problem and
//! its variable, and that a secret never shows.

use std::path::PathBuf;
use std::time::Duration;

use super::*;
use crate::auth::password;

const GOOD_SECRET: &str = "b1f9c0e4d2a7c3e8f5a6b9d0c1e2f3a4";
const GOOD_PASSWORD: &str = "correct horse battery";

fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut all = vec![
        ("SVC_JWT_SECRET".to_string(), GOOD_SECRET.to_string()),
        ("SVC_ADMIN_PASSWORD".to_string(), GOOD_PASSWORD.to_string()),
    ];
    for (k, v) in pairs {
        all.retain(|(key, _)| key != k);
        all.push((k.to_string(), v.to_string()));
    }
    all
}

/// What `svc api` requires: reading's problems, then the API's rules.
fn for_api(vars: Vec<(String, String)>) -> Result<Config, ConfigError> {
    let reading = Config::read(vars);
    reading.check_for_api().map(|()| reading.config)
}

fn api_problems(pairs: &[(&str, &str)]) -> Vec<ConfigProblem> {
    match for_api(vars(pairs)) {
        Ok(_) => vec![],
        Err(ConfigError(problems)) => problems,
    }
}

fn vars_named(problems: &[ConfigProblem]) -> Vec<&'static str> {
    problems.iter().map(|p| p.var).collect()
}

#[test]
fn defaults_are_the_spec_defaults() {
    let config = for_api(vars(&[])).unwrap();
    assert_eq!(config.mode, Mode::Master);
    assert!(config.api.disallow_master);
    assert_eq!(config.api.jwt_exp_minutes, 240);
    assert_eq!(config.api.cors_origins, vec!["http://localhost:8080"]);
    assert_eq!(config.api.admin_user, "admin");
    assert!(!config.api.embed_profiler);
    assert!(!config.sniffer.embed && config.sniffer.iface.is_none());
    assert_eq!(config.sniffer.filter, "tcp");
    assert!(config.api.limiter_enabled);
    assert!(!config.api.contract_test && !config.testing && !config.api.developer);
    assert_eq!((config.api.host.as_str(), config.api.port), ("127.0.0.1", 8000));
    let secrets_key = PathBuf::from("data/secrets.key");
    assert_eq!(
        config.db,
        DatabaseConfig::Sqlite { path: PathBuf::from("data/svc.db"), writer_cache_mib: 256, secrets_key }
    );
    assert_eq!(config.log_format, LogFormat::Text);
}

#[test]
fn missing_secrets_are_each_named() {
    let problems = for_api(Vec::new()).unwrap_err().0;
    assert_eq!(vars_named(&problems), vec!["SVC_JWT_SECRET", "SVC_ADMIN_PASSWORD"]);
}

#[test]
fn insecure_jwt_secrets_are_rejected_without_echoing_them() {
    for bad in ["secret", "CHANGEME", "your-secret-key", "short-but-random-x9", &"a".repeat(40)] {
        let problems = api_problems(&[("SVC_JWT_SECRET", bad)]);
        assert_eq!(vars_named(&problems), vec!["SVC_JWT_SECRET"], "{bad}");
        let text = ConfigError(problems).to_string();
        assert!(!text.contains(bad), "message echoes the secret: {text}");
    }
}

#[test]
fn known_bad_admin_passwords_are_rejected_without_echoing_them() {
    for bad in ["admin", "Password", "password123", "tiny-pw", "Password1234", "ADMINPASSWORD"] {
        let problems = api_problems(&[("SVC_ADMIN_PASSWORD", bad)]);
        assert_eq!(vars_named(&problems), vec!["SVC_ADMIN_PASSWORD"], "{bad}");
        assert!(!ConfigError(problems).to_string().contains(bad));
    }
    let long = "x".repeat(password::MAX_BYTES + 1);
    assert_eq!(vars_named(&api_problems(&[("SVC_ADMIN_PASSWORD", &long)])), vec!["SVC_ADMIN_PASSWORD"]);
}

#[test]
fn wildcard_cors_origin_is_rejected() {
    let problems = api_problems(&[("SVC_CORS_ORIGINS", "https://a.example, *")]);
    assert_eq!(vars_named(&problems), vec!["SVC_CORS_ORIGINS"]);
    assert!(problems[0].message.contains('*'));
}

#[test]
fn malformed_cors_origin_is_rejected() {
    assert_eq!(vars_named(&api_problems(&[("SVC_CORS_ORIGINS", "dashboard.example")])), vec!["SVC_CORS_ORIGINS"]);
}

#[test]
fn ports_must_be_in_range() {
    for bad in ["0", "65536", "-1", "http", ""] {
        let problems = api_problems(&[("SVC_API_PORT", bad), ("SVC_WEB_PORT", bad)]);
        assert_eq!(vars_named(&problems), vec!["SVC_WEB_PORT", "SVC_API_PORT"], "{bad:?}");
    }
    let config = for_api(vars(&[("SVC_API_PORT", "1"), ("SVC_WEB_PORT", "65535")])).unwrap();
    assert_eq!(config.api.port, 1);
    // The dashboard's port is only the default CORS origin's.
    assert_eq!(config.api.cors_origins, vec!["http://localhost:65535"]);
}

#[test]
fn jwt_lifetime_must_be_positive() {
    for bad in ["0", "-5", "ten", "1.5"] {
        assert_eq!(vars_named(&api_problems(&[("SVC_JWT_EXP_MINUTES", bad)])), vec!["SVC_JWT_EXP_MINUTES"]);
    }
    assert_eq!(for_api(vars(&[("SVC_JWT_EXP_MINUTES", "15")])).unwrap().api.jwt_exp_minutes, 15);
}

#[test]
fn public_binding_refuses_loopback_cors_origin() {
    for origin in ["http://localhost:8080", "http://127.0.0.1:3000", "http://[::1]:8080"] {
        let problems = api_problems(&[("SVC_API_HOST", "0.0.0.0"), ("SVC_CORS_ORIGINS", origin)]);
        assert_eq!(vars_named(&problems), vec!["SVC_CORS_ORIGINS"], "{origin}");
    }
    let ok = [("SVC_API_HOST", "0.0.0.0"), ("SVC_CORS_ORIGINS", "https://dash.example")];
    assert!(api_problems(&ok).is_empty());
}

#[test]
fn loopback_binding_allows_loopback_cors_origin() {
    for host in ["127.0.0.1", "localhost", "::1"] {
        assert!(api_problems(&[("SVC_API_HOST", host)]).is_empty(), "{host}");
    }
}

#[test]
fn public_binding_refuses_plaintext_remote_canary_base() {
    let public = [("SVC_API_HOST", "10.0.0.5"), ("SVC_CORS_ORIGINS", "https://dash.example")];
    let with = |canary: &'static str| {
        let mut pairs = public.to_vec();
        pairs.push(("SVC_CANARY_HTTP_BASE", canary));
        api_problems(&pairs)
    };
    assert_eq!(vars_named(&with("http://canary.example")), vec!["SVC_CANARY_HTTP_BASE"]);
    assert_eq!(vars_named(&with("HTTP://canary.example:80/x")), vec!["SVC_CANARY_HTTP_BASE"]);
    assert!(with("https://canary.example").is_empty());
    assert!(with("http://127.0.0.1:9000").is_empty());
}

#[test]
fn only_svc_testing_1_relaxes_validation() {
    let weak = [
        ("SVC_JWT_SECRET", "secret"),
        ("SVC_ADMIN_PASSWORD", "admin"),
        ("SVC_API_HOST", "0.0.0.0"),
        ("SVC_CANARY_HTTP_BASE", "http://canary.example"),
    ];
    let expected = vec!["SVC_CORS_ORIGINS", "SVC_CANARY_HTTP_BASE", "SVC_JWT_SECRET", "SVC_ADMIN_PASSWORD"];
    assert_eq!(vars_named(&api_problems(&weak)), expected);

    let mut relaxed = weak.to_vec();
    relaxed.push(("SVC_TESTING", "1"));
    assert!(api_problems(&relaxed).is_empty());

    for marker in
        [("SVC_TESTING", "true"), ("SVC_TESTING", "yes"), ("SVC_DEVELOPER", "true"), ("SVC_CONTRACT_TEST", "true")]
    {
        let mut pairs = weak.to_vec();
        pairs.push(marker);
        assert_eq!(vars_named(&api_problems(&pairs)), expected, "{marker:?} must not relax validation");
    }
    // Variables outside the SVC_ namespace (CI, PYTEST_CURRENT_TEST, …) are never read.
    let mut pairs = vars(&weak);
    pairs.push(("CI".into(), "true".into()));
    pairs.push(("TESTING".into(), "1".into()));
    assert_eq!(vars_named(&for_api(pairs).unwrap_err().0), expected);
}

#[test]
fn svc_testing_still_requires_the_secrets() {
    let problems = for_api(vec![("SVC_TESTING".to_string(), "1".to_string())]).unwrap_err().0;
    assert_eq!(vars_named(&problems), vec!["SVC_JWT_SECRET", "SVC_ADMIN_PASSWORD"]);
}

#[test]
fn every_problem_is_reported_at_once() {
    let problems = api_problems(&[
        ("SVC_JWT_SECRET", "changeme"),
        ("SVC_API_PORT", "99999"),
        ("SVC_CORS_ORIGINS", "*"),
        ("SVC_JWT_EXP_MINUTES", "0"),
        ("SVC_DB_TYPE", "postgres"),
        ("SVC_MODE", "replica"),
        ("SVC_DEVELOPER", "maybe"),
    ]);
    let mut named = vars_named(&problems);
    named.sort();
    assert_eq!(
        named,
        vec![
            "SVC_API_PORT",
            "SVC_CORS_ORIGINS",
            "SVC_DB_TYPE",
            "SVC_DEVELOPER",
            "SVC_JWT_EXP_MINUTES",
            "SVC_JWT_SECRET",
            "SVC_MODE"
        ]
    );
}

#[test]
fn mysql_needs_a_url_and_keeps_it_secret() {
    assert_eq!(vars_named(&api_problems(&[("SVC_DB_TYPE", "mysql")])), vec!["SVC_DB_URL"]);
    for bad in ["postgres://h/db", "mysql://root@db:3306", "mysql://root@db:3306/", "mysql://db/?ssl-mode=required"] {
        let problems = api_problems(&[("SVC_DB_TYPE", "mysql"), ("SVC_DB_URL", bad)]);
        assert_eq!(vars_named(&problems), vec!["SVC_DB_URL"], "{bad}");
    }
    let good = for_api(vars(&[("SVC_DB_TYPE", "mysql"), ("SVC_DB_URL", "mysql://db/svc?ssl-mode=required")]));
    assert!(good.is_ok());
    let config =
        for_api(vars(&[("SVC_DB_TYPE", "MySQL"), ("SVC_DB_URL", "mysql://root:hunter2@db:3306/svc")])).unwrap();
    assert!(matches!(config.db, DatabaseConfig::Mysql { .. }));
    assert!(!format!("{config:?}").contains("hunter2"));
    assert!(!format!("{config:?}").contains(GOOD_SECRET));
}

#[test]
fn an_agent_host_is_refused_unless_allowed() {
    for (mode, disallow) in [("agent", None), ("Agent", Some("TRUE")), ("AGENT", Some("true"))] {
        let mut pairs = vec![("SVC_MODE", mode)];
        pairs.extend(disallow.map(|d| ("SVC_DISALLOW_MASTER", d)));
        let problems = api_problems(&pairs);
        assert_eq!(vars_named(&problems), vec!["SVC_MODE"]);
        assert!(problems[0].message.contains("master-only"));
    }
    assert!(api_problems(&[("SVC_MODE", "agent"), ("SVC_DISALLOW_MASTER", "false")]).is_empty());
    assert!(api_problems(&[("SVC_MODE", "master")]).is_empty());
}

#[test]
fn mode_and_flags_are_case_insensitive() {
    let config = for_api(vars(&[("SVC_MODE", "AGENT"), ("SVC_DISALLOW_MASTER", "False")])).unwrap();
    assert_eq!(config.mode, Mode::Agent);
    assert!(!config.api.disallow_master);
}

#[test]
fn other_commands_do_not_need_the_api_secrets() {
    assert!(Config::from_vars(Vec::new()).is_ok());
}

#[test]
fn empty_ingest_log_file_means_none() {
    assert_eq!(for_api(vars(&[("SVC_INGEST_LOG_FILE", "")])).unwrap().ingest.log_file, None);
}

#[test]
fn profiler_poll_is_in_milliseconds() {
    assert_eq!(Config::from_vars(Vec::new()).unwrap().profiler.poll, Duration::from_secs(2));
    let config = Config::from_vars(vars(&[("SVC_PROFILER_POLL_MS", "50")])).unwrap();
    assert_eq!(config.profiler.poll, Duration::from_millis(50));
    let err = Config::from_vars(vars(&[("SVC_PROFILER_POLL_MS", "0")])).unwrap_err();
    assert_eq!(err.0[0].var, "SVC_PROFILER_POLL_MS");
}

#[test]
fn webhook_destination_rules_are_on_unless_turned_off() {
    let config = Config::from_vars(Vec::new()).unwrap();
    let webhook = &config.webhook;
    assert_eq!(
        (webhook.allow_private, webhook.timeout, webhook.retry_base, webhook.failure_limit, config.api.embed_webhook),
        (false, Duration::from_secs(10), Duration::from_secs(1), 5, false)
    );
    let config =
        Config::from_vars(vars(&[("SVC_WEBHOOK_ALLOW_PRIVATE", "true"), ("SVC_EMBED_WEBHOOK", "true")])).unwrap();
    assert!(config.webhook.allow_private && config.api.embed_webhook);
    // Anything but a clear yes or no is refused rather than guessed.
    let err = Config::from_vars(vars(&[("SVC_WEBHOOK_ALLOW_PRIVATE", "maybe"), ("SVC_WEBHOOK_FAILURE_LIMIT", "0")]))
        .unwrap_err();
    let named: Vec<&str> = err.0.iter().map(|p| p.var).collect();
    assert_eq!(named, ["SVC_WEBHOOK_ALLOW_PRIVATE", "SVC_WEBHOOK_FAILURE_LIMIT"]);
}

#[test]
fn worker_windows_default_to_the_spec_and_accept_fractions() {
    let config = Config::from_vars(Vec::new()).unwrap();
    assert_eq!(
        (config.bus.heartbeat_interval, config.bus.worker_stale_after, config.api.unit_cache, config.api.unit_dirs),
        (Duration::from_secs(30), Duration::from_secs(90), Duration::from_secs(30), None)
    );
    let config = Config::from_vars(vars(&[("SVC_HEARTBEAT_SECS", "0.5"), ("SVC_UNIT_DIRS", "/a::/b")])).unwrap();
    assert_eq!(config.bus.heartbeat_interval, Duration::from_millis(500));
    assert_eq!(config.api.unit_dirs, Some(vec![PathBuf::from("/a"), PathBuf::from("/b")]));
    let err = Config::from_vars(vars(&[("SVC_WORKER_STALE_SECS", "0"), ("SVC_UNIT_CACHE_SECS", "soon")])).unwrap_err();
    let vars: Vec<&str> = err.0.iter().map(|p| p.var).collect();
    assert_eq!(vars, ["SVC_WORKER_STALE_SECS", "SVC_UNIT_CACHE_SECS"]);
}

#[test]
fn the_stream_cap_defaults_to_five_and_must_be_at_least_one() {
    assert_eq!(Config::from_vars(Vec::new()).unwrap().api.sse_max_per_user, 5);
    assert_eq!(Config::from_vars(vars(&[("SVC_SSE_MAX_PER_USER", " 12 ")])).unwrap().api.sse_max_per_user, 12);
    for bad in ["0", "-1", "two", "1.5"] {
        let err = Config::from_vars(vars(&[("SVC_SSE_MAX_PER_USER", bad)])).unwrap_err();
        assert_eq!(vars_named(&err.0), ["SVC_SSE_MAX_PER_USER"], "{bad}");
    }
}

#[test]
fn the_sqlite_writer_cache_is_a_bounded_number_of_mib() {
    let cache = |pairs: &[(&str, &str)]| match Config::from_vars(vars(pairs)).unwrap().db {
        DatabaseConfig::Sqlite { writer_cache_mib, .. } => writer_cache_mib,
        other => panic!("{other:?}"),
    };
    assert_eq!(cache(&[]), 256);
    assert_eq!(cache(&[("SVC_DB_CACHE_MB", "64")]), 64);
    for bad in ["0", "1", "65537", "lots"] {
        let err = Config::from_vars(vars(&[("SVC_DB_CACHE_MB", bad)])).unwrap_err();
        assert_eq!(vars_named(&err.0), ["SVC_DB_CACHE_MB"], "{bad}");
    }
}

#[test]
fn reading_problems_come_first_then_the_apis_rules_in_step_order() {
    let problems = api_problems(&[
        ("SVC_JWT_SECRET", "changeme"),
        ("SVC_ADMIN_PASSWORD", "admin"),
        ("SVC_API_PORT", "70000"),
        ("SVC_MODE", "agent"),
        ("SVC_API_HOST", "0.0.0.0"),
    ]);
    let expected = ["SVC_API_PORT", "SVC_CORS_ORIGINS", "SVC_MODE", "SVC_JWT_SECRET", "SVC_ADMIN_PASSWORD"];
    assert_eq!(vars_named(&problems), expected);
    // Every command but the API is refused only for what reading found.
    let reading = Config::read(vars(&[("SVC_JWT_SECRET", "changeme"), ("SVC_MODE", "agent")]));
    assert!(reading.check().is_ok());
    assert!(reading.check_for_api().is_err());
}

#[test]
fn the_sniffer_section_reads_its_variables_and_names_bad_ones() {
    let mut env =
        vars(&[("SVC_EMBED_SNIFFER", "true"), ("SVC_SNIFFER_IFACE", "eth9"), ("SVC_SNIFFER_DEDUP_SECS", "2")]);
    let config = for_api(env.clone()).unwrap();
    assert!(config.sniffer.embed);
    assert_eq!(config.sniffer.iface.as_deref(), Some("eth9"));
    assert_eq!(config.sniffer.dedup_window, std::time::Duration::from_secs(2));
    env.push(("SVC_SNIFFER_MAX_FLOWS".into(), "0".into()));
    env.push(("SVC_EMBED_SNIFFER".into(), "maybe".into()));
    let vars: Vec<&str> = for_api(env).unwrap_err().0.iter().map(|p| p.var).collect();
    assert!(vars.contains(&"SVC_SNIFFER_MAX_FLOWS") && vars.contains(&"SVC_EMBED_SNIFFER"), "{vars:?}");
}

#[test]
fn the_prober_section_is_off_and_private_free_by_default_and_names_bad_ports() {
    let config = for_api(vars(&[])).unwrap();
    assert!(!config.prober.embed && !config.prober.allow_private);
    assert_eq!(config.prober.tls_ports, [443, 8443, 8080, 4443, 50050, 2222, 993, 995, 8888, 9001]);
    assert_eq!(config.prober.ssh_ports, [22, 2222, 22222, 2022]);
    let mut env = vars(&[
        ("SVC_EMBED_PROBER", "true"),
        ("SVC_PROBER_ALLOW_PRIVATE", "true"),
        ("SVC_PROBER_TLS_PORTS", "4443, 4443,8443"),
        ("SVC_PROBER_SSH_PORTS", ""),
    ]);
    let config = for_api(env.clone()).unwrap();
    assert!(config.prober.embed && config.prober.allow_private);
    assert_eq!(config.prober.tls_ports, [4443, 8443], "listed once each");
    assert!(config.prober.ssh_ports.is_empty(), "an empty list turns the probe off");
    env.push(("SVC_PROBER_TCPFP_PORTS".into(), "22,70000".into()));
    env.push(("SVC_PROBER_MAX_PPS".into(), "0".into()));
    let vars: Vec<&str> = for_api(env).unwrap_err().0.iter().map(|p| p.var).collect();
    assert_eq!(vars, ["SVC_PROBER_MAX_PPS", "SVC_PROBER_TCPFP_PORTS"]);
}

#[test]
fn the_canary_dns_listener_needs_a_zone_and_judges_its_settings() {
    let config = for_api(vars(&[])).unwrap();
    assert_eq!((config.api.canary_dns, config.api.canary_triggers_per_minute), (None, 60));
    let config =
        for_api(vars(&[("SVC_CANARY_DNS_ZONE", "Trap.Example.NET."), ("SVC_CANARY_DNS_ANSWER", "192.0.2.7")])).unwrap();
    let dns = config.api.canary_dns.unwrap();
    assert_eq!((dns.zone.as_str(), dns.listen.to_string()), ("trap.example.net", "0.0.0.0:53".to_string()));
    assert_eq!(dns.answer, Some("192.0.2.7".parse().unwrap()));
    for (var, value) in [
        ("SVC_CANARY_DNS_ZONE", "trap_example.net"),
        ("SVC_CANARY_DNS_ZONE", "a..b"),
        ("SVC_CANARY_DNS_LISTEN", "localhost"),
        ("SVC_CANARY_DNS_ANSWER", "::1"),
        ("SVC_CANARY_TRIGGERS_PER_MINUTE", "0"),
    ] {
        let problems = api_problems(&[("SVC_CANARY_DNS_ZONE", "trap.example.net"), (var, value)]);
        assert_eq!(vars_named(&problems), vec![var], "{var}={value}");
    }
}

/// The settings file an enrollment bundle carries, read as the agent host reads it once installed
/// under a root: the agent of the master it was written for, whose files are the bundle's own.
#[test]
fn an_enrollment_bundles_settings_read_as_the_agent_it_meant() {
    use std::io::Read;

    use crate::swarm::bundle::{self, BundleSpec, ROOT_PLACEHOLDER};
    use crate::swarm::config::SETTINGS_PATH;
    use crate::swarm::pki::Leaf;

    let leaf = |name: &str| Leaf {
        cert_pem: format!("{name} CERT"),
        key_pem: format!("{name} KEY"),
        fingerprint: "f".repeat(64),
    };
    let (agent, updater) = (leaf("agent"), leaf("updater"));
    let tmp = tempfile::tempdir().unwrap();
    let binary = tmp.path().join("svc");
    std::fs::write(&binary, b"svc").unwrap();
    let host_uuid = uuid::Uuid::new_v4();
    let spec = BundleSpec {
        host_uuid,
        agent_name: "worker-1",
        master_host: "master.example",
        swarm_port: 9770,
        syslog_port: 7514,
        agent_port: 9765,
        ca_cert_pem: "CA CERT",
        agent: &agent,
        updater: Some(&updater),
        services_ini: None,
        svc_binary: &binary,
    };
    let tgz = bundle::build(&spec).unwrap();
    let mut files = std::collections::HashMap::new();
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(tgz.as_slice()));
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().to_string_lossy().into_owned();
        let mut text = String::new();
        entry.read_to_string(&mut text).unwrap();
        files.insert(path, text);
    }
    // As the install script leaves it: the root written in for the placeholder.
    let root = PathBuf::from("/srv/host-1");
    let installed = files[SETTINGS_PATH].replace(ROOT_PLACEHOLDER, root.to_str().unwrap());
    let pairs = installed
        .lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .map(|line| line.split_once('=').expect("a setting"))
        .map(|(var, value)| (var.to_string(), value.to_string()));
    let reading = Config::read(pairs.collect::<Vec<_>>());
    assert!(reading.problems.is_empty(), "{:?}", reading.problems);
    let config = reading.config;
    assert_eq!(config.mode, Mode::Agent);
    assert!(config.api.disallow_master, "the host refuses to run the master API");
    let swarm = &config.swarm;
    assert_eq!(swarm.agent.host_uuid, Some(host_uuid));
    assert_eq!(swarm.agent.master_host.as_deref(), Some("master.example"));
    assert_eq!((swarm.agent.master_port, swarm.syslog_port, swarm.agent.port), (9770, 7514, 9765));
    assert_eq!(swarm.agent.install_root, root);
    // Each file the settings name is the one the bundle installed there.
    let installed_file = |path: &std::path::Path| {
        let relative = path.strip_prefix(&root).unwrap_or_else(|_| panic!("{} is under the root", path.display()));
        files[relative.to_str().unwrap()].clone()
    };
    assert_eq!(installed_file(&swarm.agent.cert), "agent CERT");
    assert_eq!(installed_file(&swarm.agent.key), "agent KEY");
    assert_eq!(installed_file(&swarm.agent.ca), "CA CERT");
    assert_eq!(installed_file(&swarm.updater.cert), "updater CERT");
    assert_eq!(installed_file(&swarm.updater.key), "updater KEY");
    assert_eq!(installed_file(&swarm.updater.ca), "CA CERT");
    assert_eq!(installed_file(&swarm.updater.installed_binary), "svc");
}
