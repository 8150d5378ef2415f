//! The public port's paths: `/actor/<class>/<percent-encoded name>/<rest>`.

use crate::names::{NameError, RawAddress, decode};

/// The path prefix that reaches actors; every other path reaches the front.
pub const ACTOR_PREFIX: &str = "/actor/";

/// An `/actor/` path split into its address (not validated yet: admission
/// checks the class, then the name) and what the actor sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActorPath {
    pub address: RawAddress,
    /// The rest of the path, starting with `/`, with the query if any.
    pub rest: String,
}

/// Splits an `/actor/` path; `None` for any other path, an error for a
/// name whose percent-encoding is broken (`%zz`, a bare `%`): the client's
/// `400`. `/actor/c/n` and `/actor/c/n/` both give the rest `/`.
pub fn parse_actor_path(path: &str, query: Option<&str>) -> Option<Result<ActorPath, NameError>> {
    let tail = path.strip_prefix(ACTOR_PREFIX)?;
    let (class, after) = tail.split_once('/').unwrap_or((tail, ""));
    let (name, rest) = match after.find('/') {
        Some(i) => (&after[..i], &after[i..]),
        None => (after, "/"),
    };
    let mut rest = rest.to_owned();
    if let Some(q) = query {
        rest.push('?');
        rest.push_str(q);
    }
    Some(decode(name).map(|name| ActorPath { address: RawAddress { class: class.to_owned(), name }, rest }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(path: &str, q: Option<&str>) -> (String, Vec<u8>, String) {
        let a = parse_actor_path(path, q).unwrap().unwrap();
        (a.address.class, a.address.name, a.rest)
    }

    #[test]
    fn splits_class_name_and_rest() {
        assert_eq!(p("/actor/counter/x/", None), ("counter".into(), b"x".to_vec(), "/".into()));
        assert_eq!(p("/actor/counter/x", None), ("counter".into(), b"x".to_vec(), "/".into()));
        assert_eq!(p("/actor/counter/x/peek", Some("a=1")), ("counter".into(), b"x".to_vec(), "/peek?a=1".into()));
        assert_eq!(p("/actor/c/a%2Fb/r/s", None), ("c".into(), b"a/b".to_vec(), "/r/s".into()));
        assert_eq!(p("/actor/c/%FF/", None), ("c".into(), vec![0xff], "/".into()));
        assert_eq!(p("/actor/c", None), ("c".into(), vec![], "/".into()));
        assert_eq!(p("/actor/", None), ("".into(), vec![], "/".into()));
        assert_eq!(p("/actor/c/", Some("q")), ("c".into(), vec![], "/?q".into()));
    }

    #[test]
    fn a_broken_escape_in_the_name_is_an_error() {
        for bad in ["/actor/counter/%zz/", "/actor/counter/a%/", "/actor/c/%4/x", "/actor/c/%"] {
            assert_eq!(parse_actor_path(bad, None), Some(Err(NameError::BadEncoding)), "{bad}");
        }
        // The rest is the actor's own: it is not decoded here.
        assert!(parse_actor_path("/actor/c/n/%zz", None).unwrap().is_ok());
    }

    #[test]
    fn other_paths_are_not_actor_paths() {
        assert!(parse_actor_path("/", None).is_none());
        assert!(parse_actor_path("/actor", None).is_none());
        assert!(parse_actor_path("/actors/x/y", None).is_none());
        assert!(parse_actor_path("/page/actor/x/y", None).is_none());
    }
}
