//! Counterexamples as readable tables: one line per node.

use super::events::Event;
use super::name;
use super::state::State;

impl std::fmt::Debug for State {
    /// One line per node, so that a counterexample reads as a table.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "cut={:?} clock={} fences={:?} acked={:?} faults={}",
            self.cut.map(name),
            self.clock,
            self.fences
                .iter()
                .map(|(t, at)| format!("{}@{at}", name(*t)))
                .collect::<Vec<_>>(),
            self.acked,
            self.faults
        )?;
        for (i, n) in self.nodes.iter().enumerate() {
            let data = match &n.data {
                None => "no data".to_string(),
                Some(d) => format!(
                    "data(epoch {}{} member {} config [{}] log {:?} commit {} lock {:?}{}{}{})",
                    d.epoch,
                    d.pending
                        .map(|p| format!(" pending {p}"))
                        .unwrap_or_default(),
                    d.member,
                    d.config
                        .iter()
                        .map(|e| format!(
                            "{}#{}{}",
                            name(e.node),
                            e.id,
                            if e.learner { "(learner)" } else { "" }
                        ))
                        .collect::<Vec<_>>()
                        .join(" "),
                    d.log,
                    d.commit,
                    d.lock.map(name),
                    if d.departed { " departed" } else { "" },
                    if d.removed { " removed" } else { "" },
                    if d.synced { "" } else { " unsynced" },
                ),
            };
            writeln!(
                f,
                "  {}: power={} boot={} pcmk={} quorate={} target={} started={} stopped_at={:?} etcd={} in_sync={} claim={:?} archives={} lost={:?} seen={:?} pending={:?}\n      {data}",
                name(i),
                n.power,
                n.boot,
                n.pcmk,
                n.quorate,
                n.target,
                n.started,
                n.stopped_at,
                n.etcd,
                n.in_sync,
                n.claim.map(|c| (c.epoch, c.at)),
                n.archives,
                n.lost,
                n.seen,
                n.pending,
            )?;
        }
        Ok(())
    }
}

pub(super) fn render_trail(trail: &[Event]) -> String {
    trail
        .iter()
        .map(|e| format!("{e:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}
