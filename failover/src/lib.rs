//! failover
