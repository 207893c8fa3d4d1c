//! `etcd-warden`: the host daemon and its command-line interface.
//! All logic lives in the `etcd_warden` library; this is only the entry point.

fn main() -> std::process::ExitCode {
    etcd_warden::cli::main()
}
