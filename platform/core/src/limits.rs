//! The node's limits (DESIGN §6), loaded from `policies/limits.toml`.
//!
//! Durations are seconds as decimals, so a test can set `idle_secs = 0.2`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

const MIB: u64 = 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Request or response body of an HTTP event or a call.
    pub body_bytes: u64,
    /// A guest's linear memory.
    pub memory_bytes: u64,
    /// The wall of one actor event.
    pub wall_per_event_secs: f64,
    /// The wall of one front request.
    pub front_wall_secs: f64,
    /// Front slots per node (the part of the pool kept from actors).
    pub front_slots: u32,
    /// How long a front request waits for a free slot before `503`.
    pub front_slot_wait_secs: f64,
    /// Entries in one `call-many`.
    pub call_many_entries: u32,
    /// Events queued per actor before `callee overloaded`.
    pub queue_per_actor: u32,
    /// Idle time before an actor hibernates.
    pub idle_secs: f64,
    pub sockets_per_actor: u32,
    pub sockets_per_node: u32,
    pub socket_message_bytes: u64,
    pub socket_queue_bytes: u64,
    /// The longest any one call may wait.
    pub call_limit_secs: f64,
    /// How long an event waits for a pool instance before `503`.
    pub admission_wait_secs: f64,
    pub failover_wait_secs: f64,
    pub relay_secs: f64,
    /// A storage key, in bytes.
    pub storage_key_bytes: u32,
    /// A storage value, in bytes.
    pub storage_value_bytes: u64,
    /// Instances in the node's pool, front slots included.
    pub pool_instances: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            body_bytes: 16 * MIB,
            memory_bytes: 128 * MIB,
            wall_per_event_secs: 30.0,
            front_wall_secs: 30.0,
            front_slots: 100,
            front_slot_wait_secs: 1.0,
            call_many_entries: 16,
            queue_per_actor: 1000,
            idle_secs: 10.0,
            sockets_per_actor: 1000,
            sockets_per_node: 50_000,
            socket_message_bytes: MIB,
            socket_queue_bytes: 4 * MIB,
            call_limit_secs: 30.0,
            admission_wait_secs: 5.0,
            failover_wait_secs: 10.0,
            relay_secs: 30.0,
            storage_key_bytes: 2048,
            storage_value_bytes: MIB,
            pool_instances: 1000,
        }
    }
}

/// A limit that cannot be served. The text names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("limits: {field}: {reason}")]
pub struct LimitError {
    pub field: &'static str,
    pub reason: &'static str,
}

impl Limits {
    /// Checks what deserialization cannot: positive durations, a pool
    /// larger than the front's slots.
    pub fn validate(&self) -> Result<(), LimitError> {
        let secs = [
            ("wall_per_event_secs", self.wall_per_event_secs),
            ("front_wall_secs", self.front_wall_secs),
            ("front_slot_wait_secs", self.front_slot_wait_secs),
            ("idle_secs", self.idle_secs),
            ("call_limit_secs", self.call_limit_secs),
            ("admission_wait_secs", self.admission_wait_secs),
            ("failover_wait_secs", self.failover_wait_secs),
            ("relay_secs", self.relay_secs),
        ];
        for (field, v) in secs {
            if !(v.is_finite() && v > 0.0 && v < 1e9) {
                return Err(LimitError { field, reason: "must be a positive number of seconds" });
            }
        }
        if self.queue_per_actor == 0 {
            return Err(LimitError { field: "queue_per_actor", reason: "must be at least 1" });
        }
        if self.front_slots == 0 {
            return Err(LimitError { field: "front_slots", reason: "must be at least 1" });
        }
        if self.pool_instances <= self.front_slots {
            return Err(LimitError { field: "pool_instances", reason: "must be larger than front_slots" });
        }
        if self.memory_bytes < 64 * 1024 {
            return Err(LimitError { field: "memory_bytes", reason: "must be at least one 64 KiB page" });
        }
        Ok(())
    }

    /// Instances actors may hold at once: the pool less the front's slots.
    pub fn actor_instances(&self) -> u32 {
        self.pool_instances.saturating_sub(self.front_slots)
    }

    /// Front calls that may wait on one actor at once: a quarter of the
    /// slots, at least one.
    pub fn front_calls_per_actor(&self) -> u32 {
        (self.front_slots / 4).max(1)
    }

    /// Front calls that may wait on the node at once: the slots' worth.
    pub fn front_calls_per_node(&self) -> u32 {
        self.front_slots
    }

    pub fn front_wall(&self) -> Duration {
        Duration::from_secs_f64(self.front_wall_secs)
    }

    pub fn front_slot_wait(&self) -> Duration {
        Duration::from_secs_f64(self.front_slot_wait_secs)
    }

    pub fn call_limit(&self) -> Duration {
        Duration::from_secs_f64(self.call_limit_secs)
    }

    pub fn wall_per_event(&self) -> Duration {
        Duration::from_secs_f64(self.wall_per_event_secs)
    }

    pub fn idle(&self) -> Duration {
        Duration::from_secs_f64(self.idle_secs)
    }

    pub fn admission_wait(&self) -> Duration {
        Duration::from_secs_f64(self.admission_wait_secs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_front_bounds_are_a_quarter_of_the_slots_and_the_slots() {
        let with = |front_slots| Limits { front_slots, ..Limits::default() };
        assert_eq!(with(8).front_calls_per_actor(), 2);
        assert_eq!(with(9).front_calls_per_actor(), 2);
        assert_eq!(with(3).front_calls_per_actor(), 1, "never zero");
        assert_eq!(with(1).front_calls_per_actor(), 1);
        assert_eq!(with(8).front_calls_per_node(), 8);
    }

    #[test]
    fn defaults_are_design_section_6() {
        let l = Limits::default();
        assert_eq!(l.body_bytes, 16 << 20);
        assert_eq!(l.memory_bytes, 128 << 20);
        assert_eq!(l.wall_per_event(), Duration::from_secs(30));
        assert_eq!(l.front_slots, 100);
        assert_eq!(l.queue_per_actor, 1000);
        assert_eq!(l.idle(), Duration::from_secs(10));
        assert_eq!(l.admission_wait(), Duration::from_secs(5));
        assert_eq!(l.actor_instances(), 900);
        assert_eq!(l.front_wall(), Duration::from_secs(30));
        assert_eq!(l.front_calls_per_actor(), 25);
        assert_eq!(l.front_calls_per_node(), 100);
        assert_eq!(l.call_limit(), Duration::from_secs(30));
        assert_eq!(l.validate(), Ok(()));
    }

    #[test]
    fn validation_names_the_field() {
        let l = Limits { idle_secs: 0.0, ..Limits::default() };
        assert_eq!(l.validate().unwrap_err().to_string(), "limits: idle_secs: must be a positive number of seconds");
        let l = Limits { pool_instances: 100, ..Limits::default() };
        assert_eq!(l.validate().unwrap_err().field, "pool_instances");
        let l = Limits { wall_per_event_secs: f64::NAN, ..Limits::default() };
        assert_eq!(l.validate().unwrap_err().field, "wall_per_event_secs");
        let l = Limits { front_slots: 0, ..Limits::default() };
        assert_eq!(l.validate().unwrap_err().field, "front_slots");
        let l = Limits { queue_per_actor: 0, ..Limits::default() };
        assert_eq!(l.validate().unwrap_err().field, "queue_per_actor");
    }
}
