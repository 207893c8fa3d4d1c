//! The OCF resource agent `ocf:etcd-warden:etcd`, installed as
//! `/usr/lib/ocf/resource.d/etcd-warden/etcd`. All logic is in the library.

#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use std::io::Write;
use std::process::ExitCode;
use std::time::Instant;

use etcd_warden_agent::{EXIT_REASON_PREFIX, HostNode, SocketDaemon, invocation::Env, run_on};

fn main() -> ExitCode {
    // The action's timeout counts from here.
    let started = Instant::now();
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Variables that are not UTF-8 cannot be OCF parameters we understand.
    let env: Env = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    let exit = run_on(&args, &env, &SocketDaemon, &HostNode, started);
    let prefix = env
        .get("OCF_EXIT_REASON_PREFIX")
        .map_or(EXIT_REASON_PREFIX, String::as_str);
    // Output errors (a closed pipe) cannot be reported anywhere better; the
    // exit code still carries the result.
    let _ = std::io::stdout().write_all(exit.stdout.as_bytes());
    let _ = std::io::stderr().write_all(exit.stderr(prefix).as_bytes());
    ExitCode::from(exit.code())
}
