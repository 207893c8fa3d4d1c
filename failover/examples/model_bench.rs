//! Runs the two-node model at its default bounds, with and without the
//! liveness check, and prints the counts and times (a profiling aid).

use warden_failover::model::explore::explore;
use warden_failover::model::{Config, EtcdModel};

fn main() {
    for liveness in [false, true] {
        let config = Config {
            check_liveness: liveness,
            ..Config::two_node()
        };
        let r = explore(&EtcdModel::new(config), 80);
        println!(
            "liveness {liveness}: {} states, {} transitions, depth {}, {:?}, violation: {}",
            r.states,
            r.transitions,
            r.depth,
            r.elapsed,
            r.violation.is_some()
        );
    }
}
