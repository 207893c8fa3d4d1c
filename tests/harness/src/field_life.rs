//! Field nodes over a machine's life: a node replaced by a new machine of
//! the same name (a blank disk from the node image), the BMC password
//! changed on every BMC, and the steps an operator takes on the cluster
//! for both (`pcs host auth` of a new machine, the install of section 1).

use std::fs;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};

use crate::field::{BMC_USER, FieldCluster, hosts_lines, mount_disk, write_file};
use crate::process::{self, CmdOutput};

impl FieldCluster {
    /// Replaces node `name`, which must be powered off, by a new machine
    /// of the same name and addresses: its disk is unmounted and put aside
    /// (kept in the work directory, as a machine taken out of service) and
    /// a blank one from the node image takes its place, with the package
    /// copied to `/root` as before. The BMC stays; powering it on boots
    /// the new machine.
    pub fn replace_machine(&self, name: &str) -> Result<()> {
        ensure!(
            self.launcher(name).is_none(),
            "{name} is powered: power it off before replacing it"
        );
        let n = self.node(name)?;
        let root = n.dir.join("root");
        process::run(Command::new("umount").arg(&root), Duration::from_secs(30))?.ok()?;
        let old = (1..)
            .map(|i| n.dir.join(format!("upper.replaced-{i}")))
            .find(|p| !p.exists())
            .context("no free name for the old disk")?;
        fs::rename(n.dir.join("upper"), &old)
            .with_context(|| format!("putting {name}'s old disk aside"))?;
        // The overlay's scratch directory, not data: the new disk needs an
        // empty one.
        fs::remove_dir_all(n.dir.join("work")).context("clearing the overlay's work dir")?;
        mount_disk(n, &self.image, &hosts_lines(&self.nodes), &self.deb)
    }

    /// docs/operations.md section 1 on node `name` (a new machine): its
    /// certificate copied from the first node, the package from `/root`,
    /// Debian's etcd masked, the TLS files installed, the configuration,
    /// the daemon enabled, the `hacluster` and BMC passwords.
    pub fn install_node(&self, name: &str) -> Result<()> {
        ensure!(
            self.nodes[0].name != name,
            "the certificates are made on {name}: it cannot be installed again"
        );
        self.send_pki(name)?;
        let deb = self
            .deb
            .file_name()
            .context("the .deb path has no file name")?
            .to_string_lossy()
            .into_owned();
        self.install(name, &deb)
    }

    /// `pcs host auth NODE addr=ADDR` on `on`, the `hacluster` user and
    /// password on its standard input, as an operator types them.
    pub fn pcs_host_auth(&self, on: &str, node: &str) -> Result<CmdOutput> {
        let n = self.node(node)?;
        self.node_cmd_stdin(
            on,
            &["pcs", "host", "auth", &n.name, &format!("addr={}", n.addr)],
            &format!("hacluster\n{}\n", self.hacluster_password),
            Duration::from_secs(120),
        )?
        .ok()
    }

    /// The BMC password the harness uses now.
    pub fn bmc_password(&self) -> Result<String> {
        Ok(fs::read_to_string(&self.bmc_password_file)?
            .trim_end()
            .to_owned())
    }

    /// Sets `new` as the password of the user fence_ipmilan logs in as on
    /// every BMC, as the BMCs' administrator does (IPMI's Set User
    /// Password, in a session opened with the current password), then uses
    /// it for the harness's own IPMI calls. The new password reaches
    /// ipmitool in a root-only command file (`exec`), not on its command
    /// line.
    pub fn rotate_bmc_password(&self, new: &str) -> Result<()> {
        ensure!(
            !new.is_empty() && new.chars().all(|c| c.is_ascii_alphanumeric()) && new.len() <= 20,
            "a BMC password for the harness is 1-20 letters and digits"
        );
        let cmds = self.inner_dir().join("bmc-rotate.cmds");
        write_file(&cmds, &format!("user set password 2 {new}\n"), 0o600)?;
        let exec = cmds.display().to_string();
        let result = self.nodes.iter().try_for_each(|n| {
            self.ipmitool(&n.bmc_addr, &self.bmc_password_file, &["exec", &exec])
                .map(|_| ())
                .with_context(|| format!("setting the password on {}'s BMC", n.name))
        });
        let _ = fs::remove_file(&cmds);
        result?;
        write_file(&self.bmc_password_file, &format!("{new}\n"), 0o600)
    }

    /// Whether `node`'s BMC opens a session for the fence user with
    /// `password` (`chassis power status` answers).
    pub fn bmc_accepts(&self, node: &str, password: &str) -> Result<bool> {
        let n = self.node(node)?;
        let file = self.inner_dir().join("bmc-try.pw");
        write_file(&file, &format!("{password}\n"), 0o600)?;
        let r = self.ipmitool(&n.bmc_addr, &file, &["chassis", "power", "status"]);
        let _ = fs::remove_file(&file);
        Ok(r.is_ok())
    }

    /// ipmitool over lanplus against the BMC at `bmc`, from the
    /// management network, with the password in `password_file`.
    pub(crate) fn ipmitool(
        &self,
        bmc: &str,
        password_file: &std::path::Path,
        args: &[&str],
    ) -> Result<CmdOutput> {
        let mgmt = self.mgmt_pid()?;
        process::run(
            Command::new("nsenter")
                .arg(format!("--net=/proc/{mgmt}/ns/net"))
                .args([
                    "ipmitool", "-I", "lanplus", "-C", "3", "-H", bmc, "-U", BMC_USER, "-f",
                ])
                .arg(password_file)
                .args(args),
            Duration::from_secs(30),
        )?
        .ok()
    }
}
