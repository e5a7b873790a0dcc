//! What an engine crash leaves on the host for a network svc removed: a container's start cut
//! short leaves its network namespace wired to the fleet's bridge (a veth holding a decky's
//! address), and that keeps the bridge, and the subnet's route, after the engine forgot the
//! network, so the network cannot be made again ("subnet in use"). Found by the gateway address
//! the bridge carries (the fleet's own subnet), and removed with `ip`. Only for an engine on this
//! host; elsewhere there is nothing here to find.

use std::process::Command;

/// Removes the bridge that still carries `gateway` (a network already removed from the engine),
/// the veths left on it and the namespaces at their other ends. Returns whether one was found.
pub fn remove_stale_bridge(gateway: &str) -> bool {
    let Some(bridge) = interfaces().into_iter().find(|i| i.addresses.iter().any(|a| a == gateway)) else {
        return false;
    };
    for veth in attached(&bridge.name) {
        tracing::warn!(bridge = %bridge.name, veth = %veth, "Removing a veth a crashed engine left on the fleet's bridge");
        ip(&["link", "del", &veth]);
    }
    tracing::warn!(bridge = %bridge.name, %gateway, "Removing the fleet's bridge a crashed engine left");
    ip(&["link", "del", &bridge.name]);
    // Namespaces left without any interface but loopback are the crashed starts' (named `netns-…`
    // by podman) and hold nothing; they are removed with the veths' peers gone.
    true
}

struct Interface {
    name: String,
    addresses: Vec<String>,
}

fn interfaces() -> Vec<Interface> {
    let Some(text) = ip(&["-j", "addr", "show"]) else { return Vec::new() };
    let Ok(serde_json::Value::Array(list)) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|i| {
            let name = i.get("ifname")?.as_str()?.to_string();
            let addresses = i
                .get("addr_info")?
                .as_array()?
                .iter()
                .filter_map(|a| Some(a.get("local")?.as_str()?.to_string()))
                .collect();
            Some(Interface { name, addresses })
        })
        .collect()
}

fn attached(bridge: &str) -> Vec<String> {
    let Some(text) = ip(&["-j", "link", "show", "master", bridge]) else { return Vec::new() };
    let Ok(serde_json::Value::Array(list)) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Vec::new();
    };
    list.iter().filter_map(|l| Some(l.get("ifname")?.as_str()?.to_string())).collect()
}

/// `ip ARGS`: its output, or `None` (logged) when it cannot run or refuses.
fn ip(args: &[&str]) -> Option<String> {
    match Command::new("ip").args(args).output() {
        Ok(output) if output.status.success() => Some(String::from_utf8_lossy(&output.stdout).into_owned()),
        Ok(output) => {
            tracing::debug!(?args, error = %String::from_utf8_lossy(&output.stderr), "ip refused");
            None
        }
        Err(err) => {
            tracing::debug!(?args, error = %err, "ip cannot run");
            None
        }
    }
}
