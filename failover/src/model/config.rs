//! The bounds and switches of one model run.

use super::Mutated;
use crate::facts::Topology;

/// How the model starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Initial {
    /// Nodes powered on, no data anywhere (the fresh-bootstrap scenario).
    Fresh,
    /// A healthy cluster: every node a voter, in sync, Pacemaker happy.
    Healthy,
}

/// The bounds and switches of one model run.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Two-node or HA.
    pub topology: Topology,
    /// Number of configured nodes (2 for two-node, 3 for HA).
    pub nodes: usize,
    /// One more machine, powered off and not configured, that a
    /// `Replace` event swaps in for a configured node (HA member
    /// replacement).
    pub spare: bool,
    /// HA: a `SwapDisk` event (once per run) powers a configured node off
    /// and gives it an empty disk (its old data kept as an archive), so
    /// that the same machine, with the same peer URL, must be replaced in
    /// the membership.
    pub disk_swap: bool,
    /// Two-node: a `CrashLosingMemberDir` event is a power loss after which
    /// the node's member directory is gone (a data volume not mounted at
    /// boot, a replaced disk) while its state file, kept elsewhere, stays.
    pub lose_member_dir: bool,
    /// Two-node: a `CrashLosingStateFile` event is a power loss after which
    /// the node's state file is gone while its data is intact (an OS disk
    /// reimaged), and a `CrashReplacingDisks` event one after which the
    /// node has neither data, nor state file, nor archives (a replaced
    /// machine with the same name).
    pub lose_state_file: bool,
    /// Two-node: every daemon also keeps its own wall-clock note of when
    /// it saw each peer join (a file on /run, gone at power-off), as the
    /// rule before proofs came from Pacemaker's records did; a
    /// `LoseJoinRecord` event deletes a node's notes and a `ClockStepBack`
    /// event steps its clock back, so that its later notes read earlier
    /// than every fence (one fault each; `ClockStepBack` only with
    /// `clock_steps`).
    pub join_records: bool,
    /// With `join_records`: `ClockStepBack` events.
    pub clock_steps: bool,
    /// The fence history starts with a successful fence of every node,
    /// from before the run (a history keeps old fences).
    pub prior_fences: bool,
    /// Two-node: no fence device works (a BMC unreachable). The lost node
    /// is never fenced; an operator who knows it is off confirms it
    /// (`stonith_admin --confirm`, the `Confirm` event), which Pacemaker
    /// records as it records a fence.
    pub fence_fails: bool,
    /// A `Maintenance` event turns Pacemaker's `maintenance-mode` on or off
    /// (one fault each): Pacemaker starts and stops nothing meanwhile.
    pub maintenance: bool,
    /// Two-node: Pacemaker begins a node's start only while no start is in
    /// flight in its partition, and holds fencing meanwhile (the controller
    /// runs a new transition only once every action of the current one has
    /// ended). A start ends as the daemon's start action does: at once when
    /// its decision reports success, waiting or not; a start that waits
    /// until its deadline fails, and a failed start is not retried
    /// (`start-failure-is-fatal`), so the model lets it wait forever.
    pub serial_starts: bool,
    /// Check that the pair settles (see `check_liveness`) from every state
    /// reached with at most this many faults (1 by default: a second fault
    /// can leave a pair that only an operator may resume, e.g. a total
    /// outage that takes a member directory).
    pub liveness_faults: u8,
    /// `GracefulStop` faults (on by default).
    pub graceful_stops: bool,
    /// The liveness check accepts a pair that does not settle when a
    /// member directory is missing and the nodes refuse, each refusal
    /// naming a node with the newest data (the intended end when no
    /// automatic path is safe: the operator restores the directory, or
    /// forces from the data left, accepting the commit-index risk).
    pub refusal_ends: bool,
    /// The daemon carries out a decision's whole plan on the facts of one
    /// gathering, as the daemon does, rather than deciding again after
    /// each step (with or without it, a forced restart is preceded by a
    /// fresh gathering, and abandoned unless that leads to the same force).
    pub plans: bool,
    /// Starting point.
    pub initial: Initial,
    /// At most this many fault events (crash, partition, etcd crash, daemon
    /// restart, graceful stop) per run.
    pub max_faults: u8,
    /// At most this many client writes per run.
    pub max_writes: u8,
    /// Model the power-loss window: a follower learns that an entry is
    /// committed only from the leader's next message, and a forced member
    /// keeps only what it knows is committed, so a leader that loses power
    /// right after acknowledging a write can take that write with it.
    pub power_loss_window: bool,
    /// Check that every state reached with at most one fault settles to a
    /// healthy cluster (all voters, one quorate group) when the faults stop.
    pub check_liveness: bool,
    /// The policy the daemons use (tests inject mutations here).
    pub policy: Mutated,
    /// Rules not checked ("two claims", …): lets a test show that a mutation
    /// caught early by one rule is also caught by a deeper one.
    pub unchecked: &'static [&'static str],
}

impl Config {
    /// Two nodes starting healthy.
    pub fn two_node() -> Config {
        Config {
            topology: Topology::TwoNode,
            nodes: 2,
            spare: false,
            disk_swap: false,
            lose_member_dir: false,
            lose_state_file: false,
            join_records: false,
            clock_steps: false,
            prior_fences: false,
            fence_fails: false,
            maintenance: false,
            serial_starts: false,
            liveness_faults: 1,
            graceful_stops: true,
            refusal_ends: false,
            plans: false,
            initial: Initial::Healthy,
            max_faults: 2,
            max_writes: 1,
            power_loss_window: false,
            check_liveness: true,
            policy: Mutated::default(),
            unchecked: &[],
        }
    }

    /// Three voters starting healthy, no fencing.
    pub fn ha() -> Config {
        Config {
            topology: Topology::Ha,
            nodes: 3,
            max_faults: 1,
            ..Config::two_node()
        }
    }
}
