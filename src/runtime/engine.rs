//! [`Engine`]: the [`ContainerRuntime`] over a Docker Engine API endpoint through `bollard`:
//! Docker's socket, podman's `podman system service` socket, or a TCP address.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use async_trait::async_trait;
use bollard::Docker;
use bollard::container::{
    Config, CreateContainerOptions, ListContainersOptions, LogOutput, LogsOptions, NetworkingConfig,
    RemoveContainerOptions, StartContainerOptions, UploadToContainerOptions,
};
use bollard::errors::Error as BollardError;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::image::{ImportImageOptions, ListImagesOptions};
use bollard::models::{
    EndpointIpamConfig, EndpointSettings, HostConfig, HostConfigLogConfig, Ipam, IpamConfig, RestartPolicy,
    RestartPolicyNameEnum,
};
use bollard::network::{ConnectNetworkOptions, CreateNetworkOptions, DisconnectNetworkOptions};
use bollard::system::EventsOptions;
use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};

use super::{
    Confinement, ContainerEvent, ContainerInfo, ContainerRuntime, ContainerSpec, NetworkSpec, RuntimeError,
    RuntimeResult,
};

/// Seconds any one engine request may take (streams excepted).
const REQUEST_TIMEOUT_SECS: u64 = 120;

/// Seconds an exec's program may take to be reported ended once its output has.
const EXEC_EXIT_WAIT_SECS: u64 = 10;

/// A client of the engine at one address, connected on first use and again after a failed
/// connection, so an engine that starts after svc (or restarts) is found without restarting svc.
pub struct Engine {
    host: String,
    docker: Mutex<Option<Docker>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("host", &self.host).finish()
    }
}

impl Engine {
    /// The engine at `host`: `unix:///path`, `tcp://host:port` or `http://host:port`. Nothing is
    /// contacted yet, so a missing engine shows in health, not at startup.
    pub fn new(host: &str) -> Engine {
        Engine { host: host.to_string(), docker: Mutex::new(None) }
    }

    fn docker(&self) -> RuntimeResult<Docker> {
        let mut cached = self.docker.lock().expect("the engine client lock is never poisoned");
        if let Some(docker) = cached.as_ref() {
            return Ok(docker.clone());
        }
        let version = bollard::API_DEFAULT_VERSION;
        let docker = if let Some(path) = self.host.strip_prefix("unix://") {
            Docker::connect_with_unix(path, REQUEST_TIMEOUT_SECS, version)
        } else if self.host.starts_with("tcp://") || self.host.starts_with("http://") {
            Docker::connect_with_http(&self.host, REQUEST_TIMEOUT_SECS, version)
        } else {
            return Err(RuntimeError::Engine(format!("`{}` is neither unix://PATH nor tcp://HOST:PORT", self.host)));
        }
        .map_err(|e| RuntimeError::Unavailable(e.to_string()))?;
        *cached = Some(docker.clone());
        Ok(docker)
    }
}

/// What the engines say when a new network's subnet overlaps one in use: podman (on the host or
/// by another network), Docker (an address pool, older and newer wording).
const SUBNET_IN_USE: [&str; 3] =
    ["is already used on the host or by another config", "Pool overlaps with other one", "overlapping IPv4"];

/// What podman (netavark's address management) says when a container's address is taken,
/// followed by the holder's id.
const ADDRESS_HELD: &str = "is already allocated to container ID ";

fn classify(err: BollardError) -> RuntimeError {
    match err {
        BollardError::DockerResponseServerError { status_code: 404, message } => RuntimeError::NotFound(message),
        BollardError::DockerResponseServerError { message, .. }
            if SUBNET_IN_USE.iter().any(|text| message.contains(text)) =>
        {
            RuntimeError::SubnetInUse(message)
        }
        BollardError::DockerResponseServerError { message, .. } if message.contains(ADDRESS_HELD) => {
            let holder = message.rsplit(ADDRESS_HELD).next().unwrap_or_default().trim().to_string();
            RuntimeError::AddressHeld { holder, message }
        }
        BollardError::DockerResponseServerError { status_code, message } => {
            RuntimeError::Engine(format!("{status_code}: {message}"))
        }
        BollardError::SocketNotFoundError(_)
        | BollardError::HyperResponseError { .. }
        // The connection refused or cut (the engine's service stopped): bollard's hyper client.
        | BollardError::HyperLegacyError { .. }
        | BollardError::RequestTimeoutError
        | BollardError::IOError { .. } => RuntimeError::Unavailable(err.to_string()),
        other => RuntimeError::Engine(other.to_string()),
    }
}

/// A removal of something already gone has done its job.
fn absent_is_done(result: Result<(), BollardError>) -> RuntimeResult<()> {
    match result.map_err(classify) {
        Err(RuntimeError::NotFound(_)) => Ok(()),
        other => other,
    }
}

fn label_filter(key: &str, value: &str) -> HashMap<String, Vec<String>> {
    HashMap::from([("label".to_string(), vec![format!("{key}={value}")])])
}

/// The engine's words for a [`Confinement`]. The log driver is `json-file`, which Docker rotates by
/// `max-size`/`max-file` and podman takes as its `k8s-file` driver, capped by `max-size`.
fn confined(confinement: &Confinement) -> HostConfig {
    let positive = |n: i64| (n > 0).then_some(n);
    HostConfig {
        cap_drop: Some(vec!["ALL".to_string()]),
        cap_add: Some(confinement.capabilities.clone()),
        readonly_rootfs: Some(confinement.read_only_root),
        tmpfs: (!confinement.tmpfs.is_empty()).then(|| confinement.tmpfs.clone().into_iter().collect()),
        binds: (!confinement.binds.is_empty())
            .then(|| confinement.binds.iter().map(|(host, inside)| format!("{host}:{inside}:rw")).collect()),
        security_opt: confinement.no_new_privileges.then(|| vec!["no-new-privileges".to_string()]),
        memory: positive(confinement.memory_bytes),
        // No swap beyond the memory limit.
        memory_swap: positive(confinement.memory_bytes),
        pids_limit: positive(confinement.pids),
        log_config: Some(HostConfigLogConfig {
            typ: Some("json-file".to_string()),
            config: Some(HashMap::from([
                ("max-size".to_string(), confinement.log_max_bytes.to_string()),
                ("max-file".to_string(), confinement.log_files.to_string()),
            ])),
        }),
        ..Default::default()
    }
}

#[async_trait]
impl ContainerRuntime for Engine {
    async fn ping(&self) -> RuntimeResult<()> {
        self.docker()?.ping().await.map(drop).map_err(classify)
    }

    async fn image_exists(&self, reference: &str) -> RuntimeResult<bool> {
        match self.docker()?.inspect_image(reference).await.map_err(classify) {
            Ok(_) => Ok(true),
            Err(RuntimeError::NotFound(_)) => Ok(false),
            Err(err) => Err(err),
        }
    }

    async fn load_image(&self, archive: Bytes) -> RuntimeResult<()> {
        let mut progress = self.docker()?.import_image(ImportImageOptions { quiet: true }, archive, None);
        while let Some(step) = progress.next().await {
            let step = step.map_err(classify)?;
            if let Some(error) = step.error {
                return Err(RuntimeError::Engine(error));
            }
        }
        Ok(())
    }

    async fn image_tags(&self, repository: &str) -> RuntimeResult<Vec<String>> {
        let filters = HashMap::from([("reference".to_string(), vec![repository.to_string()])]);
        let images = self.docker()?.list_images(Some(ListImagesOptions { filters, ..Default::default() })).await;
        let prefix = format!("{repository}:");
        Ok(images
            .map_err(classify)?
            .into_iter()
            .flat_map(|image| image.repo_tags)
            .filter(|tag| tag.starts_with(&prefix))
            .collect())
    }

    async fn remove_image(&self, reference: &str) -> RuntimeResult<()> {
        match self.docker()?.remove_image(reference, None, None).await.map_err(classify) {
            Ok(_) | Err(RuntimeError::NotFound(_)) => Ok(()),
            // In use (409): a container still runs it; it goes at a later build.
            Err(RuntimeError::Engine(text)) if text.starts_with("409") => Ok(()),
            Err(err) => Err(err),
        }
    }

    async fn ensure_network(&self, spec: &NetworkSpec) -> RuntimeResult<()> {
        match self.docker()?.inspect_network::<String>(&spec.name, None).await.map_err(classify) {
            Ok(network) => {
                let subnets: Vec<String> = network
                    .ipam
                    .and_then(|ipam| ipam.config)
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|config| config.subnet)
                    .collect();
                if subnets.is_empty() || subnets.contains(&spec.subnet) {
                    return Ok(());
                }
                return Err(RuntimeError::NetworkOnAnotherSubnet {
                    name: spec.name.clone(),
                    existing: subnets.join(","),
                    wanted: spec.subnet.clone(),
                });
            }
            Err(RuntimeError::NotFound(_)) => {}
            Err(err) => return Err(err),
        }
        let options = spec.parent.iter().map(|parent| ("parent".to_string(), parent.clone())).collect();
        let config = CreateNetworkOptions::<String> {
            name: spec.name.clone(),
            driver: spec.driver.clone(),
            ipam: Ipam {
                config: Some(vec![IpamConfig {
                    subnet: Some(spec.subnet.clone()),
                    gateway: Some(spec.gateway.clone()),
                    ..Default::default()
                }]),
                ..Default::default()
            },
            options,
            internal: spec.internal,
            labels: spec.labels.clone().into_iter().collect(),
            ..Default::default()
        };
        self.docker()?.create_network(config).await.map(drop).map_err(classify)
    }

    async fn remove_network(&self, name: &str) -> RuntimeResult<()> {
        absent_is_done(self.docker()?.remove_network(name).await)
    }

    async fn run(&self, spec: &ContainerSpec) -> RuntimeResult<String> {
        self.remove(&spec.name).await?;
        let endpoint = EndpointSettings {
            ipam_config: Some(EndpointIpamConfig { ipv4_address: Some(spec.ip.clone()), ..Default::default() }),
            ..Default::default()
        };
        let config = Config::<String> {
            image: Some(spec.image.clone()),
            cmd: Some(spec.cmd.clone()),
            env: Some(spec.env.clone()),
            hostname: Some(spec.hostname.clone()),
            labels: Some(spec.labels.clone().into_iter().collect()),
            user: spec.confinement.user.clone(),
            host_config: Some(HostConfig {
                network_mode: Some(spec.network.clone()),
                sysctls: (!spec.sysctls.is_empty()).then(|| spec.sysctls.clone().into_iter().collect()),
                restart_policy: Some(RestartPolicy {
                    name: Some(RestartPolicyNameEnum::UNLESS_STOPPED),
                    maximum_retry_count: None,
                }),
                ..confined(&spec.confinement)
            }),
            networking_config: Some(NetworkingConfig {
                endpoints_config: HashMap::from([(spec.network.clone(), endpoint)]),
            }),
            ..Default::default()
        };
        let options = CreateContainerOptions { name: spec.name.clone(), platform: None };
        let created = self.docker()?.create_container(Some(options), config).await.map_err(classify)?;
        if let Err(err) = self.start(&created.id).await {
            // A container that cannot start is not left behind for the next deploy to trip on.
            let _ = self.remove(&created.id).await;
            return Err(err);
        }
        Ok(created.id)
    }

    async fn connect(&self, network: &str, container: &str, ip: &str) -> RuntimeResult<()> {
        let config = ConnectNetworkOptions::<String> {
            container: container.to_string(),
            endpoint_config: EndpointSettings {
                ipam_config: Some(EndpointIpamConfig { ipv4_address: Some(ip.to_string()), ..Default::default() }),
                ..Default::default()
            },
        };
        self.docker()?.connect_network(network, config).await.map_err(classify)
    }

    async fn disconnect(&self, network: &str, container: &str) -> RuntimeResult<()> {
        let config = DisconnectNetworkOptions::<String> { container: container.to_string(), force: true };
        absent_is_done(self.docker()?.disconnect_network(network, config).await)
    }

    async fn start(&self, name_or_id: &str) -> RuntimeResult<()> {
        self.docker()?.start_container(name_or_id, None::<StartContainerOptions<String>>).await.map_err(classify)
    }

    async fn remove(&self, name_or_id: &str) -> RuntimeResult<()> {
        let options = RemoveContainerOptions { force: true, v: true, ..Default::default() };
        absent_is_done(self.docker()?.remove_container(name_or_id, Some(options)).await)
    }

    async fn pid(&self, name_or_id: &str) -> RuntimeResult<Option<u32>> {
        let inspected = self.docker()?.inspect_container(name_or_id, None).await.map_err(classify)?;
        let state = inspected.state.unwrap_or_default();
        let pid = state.pid.and_then(|pid| u32::try_from(pid).ok()).filter(|pid| *pid > 0);
        Ok(if state.running == Some(true) { pid } else { None })
    }

    async fn put_archive(&self, container: &str, dir: &str, archive: Bytes) -> RuntimeResult<()> {
        let options = UploadToContainerOptions { path: dir.to_string(), ..Default::default() };
        self.docker()?.upload_to_container(container, Some(options), archive).await.map_err(classify)
    }

    async fn exec(&self, container: &str, user: &str, argv: &[String]) -> RuntimeResult<i64> {
        let docker = self.docker()?;
        let options = CreateExecOptions::<String> {
            cmd: Some(argv.to_vec()),
            user: Some(user.to_string()),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            ..Default::default()
        };
        let created = docker.create_exec(container, options).await.map_err(classify)?;
        let options = StartExecOptions { detach: false, ..Default::default() };
        // The output is read to its end (the program has then exited) and logged, never returned.
        if let StartExecResults::Attached { mut output, .. } =
            docker.start_exec(&created.id, Some(options)).await.map_err(classify)?
        {
            while let Some(frame) = output.next().await {
                if let LogOutput::StdErr { message } = frame.map_err(classify)? {
                    tracing::debug!(container, output = %String::from_utf8_lossy(&message), "exec wrote to stderr");
                }
            }
        }
        // podman may say the program runs (exit code 0) a moment after its output ended.
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(EXEC_EXIT_WAIT_SECS);
        loop {
            let inspected = docker.inspect_exec(&created.id).await.map_err(classify)?;
            match (inspected.running, inspected.exit_code) {
                (Some(false), Some(code)) => return Ok(code),
                _ if tokio::time::Instant::now() >= deadline => {
                    return Err(RuntimeError::Engine("exec did not report its end".into()));
                }
                _ => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
            }
        }
    }

    async fn list(&self, key: &str, value: &str) -> RuntimeResult<Vec<ContainerInfo>> {
        let options = ListContainersOptions { all: true, filters: label_filter(key, value), ..Default::default() };
        let summaries = self.docker()?.list_containers(Some(options)).await.map_err(classify)?;
        Ok(summaries
            .into_iter()
            .map(|c| ContainerInfo {
                id: c.id.unwrap_or_default(),
                name: c
                    .names
                    .and_then(|n| n.into_iter().next())
                    .unwrap_or_default()
                    .trim_start_matches('/')
                    .to_string(),
                state: c.state.unwrap_or_default(),
                labels: c.labels.unwrap_or_default().into_iter().collect::<BTreeMap<_, _>>(),
            })
            .collect())
    }

    fn stdout(&self, id: &str, since: i64, follow: bool) -> BoxStream<'static, RuntimeResult<Bytes>> {
        let options = LogsOptions::<String> { follow, stdout: true, since, timestamps: true, ..Default::default() };
        let docker = match self.docker() {
            Ok(docker) => docker,
            Err(err) => return stream::once(async move { Err(err) }).boxed(),
        };
        docker
            .logs(id, Some(options))
            .try_filter_map(|frame| async move {
                Ok(match frame {
                    LogOutput::StdOut { message } | LogOutput::Console { message } => Some(message),
                    LogOutput::StdErr { .. } | LogOutput::StdIn { .. } => None,
                })
            })
            .map_err(classify)
            .boxed()
    }

    fn events(&self, key: &str, value: &str, since: Option<i64>) -> BoxStream<'static, RuntimeResult<ContainerEvent>> {
        let mut filters = label_filter(key, value);
        filters.insert("type".into(), vec!["container".into()]);
        let options = EventsOptions::<String> { filters, since: since.map(|s| s.to_string()), ..Default::default() };
        let docker = match self.docker() {
            Ok(docker) => docker,
            Err(err) => return stream::once(async move { Err(err) }).boxed(),
        };
        docker
            .events(Some(options))
            .map_err(classify)
            .try_filter_map(|event| async move {
                let actor = event.actor.unwrap_or_default();
                let id = actor.id.unwrap_or_default();
                Ok(match event.action.as_deref() {
                    Some("start" | "restart") => {
                        let attributes = actor.attributes.unwrap_or_default().into_iter().collect();
                        Some(ContainerEvent::Started { id, attributes })
                    }
                    // A `kill` only sends a signal; the container may live on (`die` says it did not).
                    Some("die" | "stop") => Some(ContainerEvent::Stopped { id }),
                    Some("destroy" | "remove") => Some(ContainerEvent::Removed { id }),
                    Some("oom") => Some(ContainerEvent::OutOfMemory { id }),
                    _ => None,
                })
            })
            .boxed()
    }
}
