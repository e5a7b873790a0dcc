//! Which workers `svc api` runs in its own process under a configuration (spec, startup step 8):
//! the roster says which always are and which setting switches each of the others on; this reads
//! those settings.

use crate::config::Config;
use crate::roster::{EmbedSwitch, Embedding, WORKERS};

/// The names of the workers `svc api` embeds under `config`, in the roster's order.
pub fn embedded_in_api(config: &Config) -> Vec<&'static str> {
    WORKERS
        .iter()
        .filter(|worker| match worker.embedding {
            Embedding::Always => true,
            Embedding::Switched(switch) => switched_on(config, switch),
            Embedding::Never => false,
        })
        .map(|worker| worker.name)
        .collect()
}

fn switched_on(config: &Config, switch: EmbedSwitch) -> bool {
    match switch {
        EmbedSwitch::Profiler => config.api.embed_profiler,
        EmbedSwitch::Collector if config.api.embed_collector && config.ingest.log_file.is_none() => {
            tracing::warn!("SVC_EMBED_COLLECTOR is on but SVC_INGEST_LOG_FILE is empty: the collector is not started");
            false
        }
        EmbedSwitch::Collector => config.api.embed_collector,
        EmbedSwitch::Webhook => config.api.embed_webhook,
        EmbedSwitch::Sniffer => config.sniffer.embed,
        EmbedSwitch::Prober => config.prober.embed,
        EmbedSwitch::SwarmLogs => config.swarm.enabled && config.swarm.syslog_port != 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(vars: &[(&str, &str)]) -> Config {
        Config::from_vars(vars.iter().map(|(k, v)| (k.to_string(), v.to_string()))).unwrap()
    }

    #[test]
    fn the_api_always_embeds_ingestion_and_the_tarpit_watcher() {
        assert_eq!(embedded_in_api(&config(&[])), ["ingest", "tarpit"]);
    }

    #[test]
    fn each_switch_embeds_its_worker() {
        let on = [
            ("SVC_EMBED_PROFILER", "true"),
            ("SVC_EMBED_COLLECTOR", "true"),
            ("SVC_EMBED_WEBHOOK", "true"),
            ("SVC_EMBED_SNIFFER", "true"),
            ("SVC_EMBED_PROBER", "true"),
        ];
        let embedded = embedded_in_api(&config(&on));
        assert_eq!(embedded, ["ingest", "collector", "profiler", "sniffer", "prober", "tarpit", "webhook"]);
    }

    #[test]
    fn a_swarm_master_embeds_its_log_listener_unless_it_has_no_log_port() {
        let embedded = embedded_in_api(&config(&[("SVC_SWARM_ENABLED", "true")]));
        assert_eq!(embedded, ["ingest", "tarpit", "listener"]);
        let embedded = embedded_in_api(&config(&[("SVC_SWARM_ENABLED", "true"), ("SVC_SWARM_SYSLOG_PORT", "0")]));
        assert_eq!(embedded, ["ingest", "tarpit"]);
    }

    #[test]
    fn the_collector_needs_an_ingest_file_to_write() {
        let embedded = embedded_in_api(&config(&[("SVC_EMBED_COLLECTOR", "true"), ("SVC_INGEST_LOG_FILE", "")]));
        assert_eq!(embedded, ["ingest", "tarpit"]);
    }
}
