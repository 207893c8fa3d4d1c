//! The steps on this node's own markers: the departure noted in the state
//! file, and the in-sync marker of this boot.

use super::{Ctx, Fault};

/// Note in the state file that this node's member has left.
pub(super) fn record_departure<P: ?Sized, E, S>(cx: &Ctx<'_, P, E, S>) -> Result<(), Fault> {
    cx.paths.update_state(|st| st.departed = true)?;
    Ok(())
}

/// Take the departure note back.
pub(super) fn clear_departure<P: ?Sized, E, S>(cx: &Ctx<'_, P, E, S>) -> Result<(), Fault> {
    cx.paths.update_state(|st| st.departed = false)?;
    Ok(())
}

/// Mark this node's data in sync for this boot.
pub(super) fn mark_in_sync<P: ?Sized, E, S>(cx: &Ctx<'_, P, E, S>) -> Result<(), Fault> {
    cx.paths.mark_in_sync(&cx.facts.boot_id)?;
    Ok(())
}

/// Remove the in-sync marker.
pub(super) fn clear_in_sync<P: ?Sized, E, S>(cx: &Ctx<'_, P, E, S>) -> Result<(), Fault> {
    cx.paths.clear_in_sync()?;
    Ok(())
}
