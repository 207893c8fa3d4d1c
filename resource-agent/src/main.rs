//! The OCF resource agent `ocf:etcd-warden:etcd`.

fn main() -> std::process::ExitCode {
    // OCF_ERR_UNIMPLEMENTED until the agent exists.
    std::process::ExitCode::from(3)
}
