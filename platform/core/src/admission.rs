//! Admission's rules (docs/spec/actors-and-admission.md §5), in their
//! order, with the clock passed in. The actor runtime asks the store and
//! the pool between the steps; every decision is made here.
//!
//! The order: the caller's deadline; the class is one of the active
//! version's; the name is valid; the early rule; the app's required values;
//! then existence (the store, creating the actor for a caller that may);
//! quotas (the tenant's plan, with the hosted service); capacity (a pool
//! instance within the admission wait, and never past the deadline).

use std::time::{Duration, Instant};

use crate::access::Access;
use crate::names::{ActorName, RawAddress};
use crate::refusal::Refusal;

/// The actor's name, as admission meets it.
#[derive(Debug, Clone, Copy)]
pub enum Name<'a> {
    /// As the caller gave it: checked here, in its step.
    Raw(&'a RawAddress),
    /// Checked already, for an earlier event of this resident actor: a
    /// name that was valid stays valid, so it is not checked again.
    Checked(&'a ActorName),
}

/// What admission knows of an event before it asks the store.
#[derive(Debug, Clone, Copy)]
pub struct Before<'a> {
    pub now: Instant,
    /// When the caller stops waiting.
    pub deadline: Instant,
    /// The class's access level, if the class is one of the active version's.
    pub class: Option<Access>,
    pub name: Name<'a>,
    pub outside: bool,
    /// The first value the app requires that is not set, if any.
    pub missing_value: Option<&'a str>,
    /// Whether this kind of event may create the actor at all (a socket's
    /// message or close never does, docs/spec/sockets.md §10).
    pub may_create: bool,
}

/// What the store is asked, once the first steps pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wake {
    pub name: ActorName,
    /// Whether a missing actor is created for this caller.
    pub create: bool,
}

/// The steps before the store, in their order.
pub fn before_store(b: Before<'_>) -> Result<Wake, Refusal> {
    if b.now >= b.deadline {
        return Err(Refusal::DeadlinePassed);
    }
    let access = b.class.ok_or(Refusal::NoSuchClass)?;
    let name = match b.name {
        Name::Raw(target) => target.actor_name().map_err(Refusal::InvalidName)?,
        Name::Checked(name) => name.clone(),
    };
    if access.refuses_early(b.outside) {
        return Err(Refusal::Internal);
    }
    if let Some(missing) = b.missing_value {
        return Err(Refusal::ValueMissing(missing.to_owned()));
    }
    Ok(Wake { name, create: b.may_create && access.creates(b.outside) })
}

/// How long the event may wait for a pool instance at `now`: the admission
/// wait from its arrival, never past its deadline.
pub fn capacity_wait(arrived: Instant, admission_wait: Duration, deadline: Instant, now: Instant) -> Duration {
    (arrived + admission_wait).min(deadline).saturating_duration_since(now)
}

/// Why no instance came: the deadline, if it has passed, else capacity.
pub fn no_capacity(now: Instant, deadline: Instant) -> Refusal {
    if now >= deadline { Refusal::DeadlinePassed } else { Refusal::Capacity }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::NameError;

    const S: fn(u64) -> Duration = Duration::from_secs;

    fn check(f: impl FnOnce(&mut Before<'_>)) -> Result<Wake, Refusal> {
        let target = RawAddress::split("room/a").unwrap();
        let now = Instant::now();
        let mut b = Before {
            now,
            deadline: now + S(1),
            class: Some(Access::Open),
            name: Name::Raw(&target),
            outside: true,
            missing_value: None,
            may_create: true,
        };
        f(&mut b);
        before_store(b)
    }

    #[test]
    fn each_step_refuses_in_its_order() {
        let bad_name = RawAddress { class: "room".into(), name: vec![] };
        // Everything wrong: the deadline speaks first, then each in turn.
        let all_wrong = |b: &mut Before<'_>| {
            b.class = None;
            b.missing_value = Some("K");
        };
        assert_eq!(
            check(|b| {
                all_wrong(b);
                b.deadline = b.now;
            }),
            Err(Refusal::DeadlinePassed)
        );
        assert_eq!(check(all_wrong), Err(Refusal::NoSuchClass));
        let target = bad_name.clone();
        let name_then_rest = |b: &mut Before<'_>| {
            b.class = Some(Access::Internal);
            b.missing_value = Some("K");
        };
        let with_bad_name = {
            let mut b = Before {
                now: Instant::now(),
                deadline: Instant::now() + S(1),
                class: None,
                name: Name::Raw(&target),
                outside: true,
                missing_value: None,
                may_create: true,
            };
            name_then_rest(&mut b);
            before_store(b)
        };
        assert_eq!(with_bad_name, Err(Refusal::InvalidName(NameError::EmptyName)));
        assert_eq!(check(name_then_rest), Err(Refusal::Internal));
        assert_eq!(
            check(|b| {
                name_then_rest(b);
                b.outside = false;
            }),
            Err(Refusal::ValueMissing("K".into()))
        );
    }

    #[test]
    fn who_creates_a_missing_actor() {
        let creates = |access, outside, may_create| {
            check(|b| {
                b.class = Some(access);
                b.outside = outside;
                b.may_create = may_create;
            })
            .map(|w| w.create)
        };
        assert_eq!(creates(Access::Open, true, true), Ok(true));
        assert_eq!(creates(Access::Existing, true, true), Ok(false));
        assert_eq!(creates(Access::Existing, false, true), Ok(true));
        assert_eq!(creates(Access::Internal, false, true), Ok(true));
        assert_eq!(creates(Access::Internal, true, true), Err(Refusal::Internal));
        // A socket's message or close never creates.
        assert_eq!(creates(Access::Open, true, false), Ok(false));
        assert_eq!(creates(Access::Internal, false, false), Ok(false));
        assert_eq!(check(|_| {}).unwrap().name.as_str(), "a");
    }

    #[test]
    fn a_name_checked_before_is_not_checked_again_but_the_rest_is() {
        let known = ActorName::parse("known").unwrap();
        let now = Instant::now();
        let b = Before {
            now,
            deadline: now + S(1),
            class: Some(Access::Open),
            name: Name::Checked(&known),
            outside: true,
            missing_value: None,
            may_create: true,
        };
        assert_eq!(before_store(b).unwrap().name, known);
        assert_eq!(before_store(Before { class: None, ..b }), Err(Refusal::NoSuchClass));
        assert_eq!(before_store(Before { class: Some(Access::Internal), ..b }), Err(Refusal::Internal));
        assert_eq!(before_store(Before { deadline: now, ..b }), Err(Refusal::DeadlinePassed));
    }

    #[test]
    fn the_capacity_wait_ends_at_the_deadline() {
        let t0 = Instant::now();
        assert_eq!(capacity_wait(t0, S(5), t0 + S(30), t0), S(5));
        assert_eq!(capacity_wait(t0, S(5), t0 + S(30), t0 + S(2)), S(3));
        assert_eq!(capacity_wait(t0, S(5), t0 + S(1), t0), S(1));
        assert_eq!(capacity_wait(t0, S(5), t0 + S(30), t0 + S(9)), Duration::ZERO);
        assert_eq!(no_capacity(t0, t0 + S(1)), Refusal::Capacity);
        assert_eq!(no_capacity(t0 + S(1), t0 + S(1)), Refusal::DeadlinePassed);
    }
}
