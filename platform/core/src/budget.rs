//! The response budget of one `call-many` (docs/spec/calls.md §8):
//! the answers of a batch together are at most the body limit. An answer
//! is counted as its bytes arrive; one whose `Content-Length` is larger
//! than what is left fails before taking anything, unless it has no body
//! whatever its length says (the answer to a `HEAD`, a `204`, a `304`),
//! which is judged on what arrives; a partial answer that then fails gives
//! its bytes back.

/// What is left of a batch's response budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseBudget {
    left: u64,
}

/// Whether an answer has no body whatever its `Content-Length` says.
pub fn is_bodyless(request_method: &str, status: u16) -> bool {
    request_method.eq_ignore_ascii_case("HEAD") || status == 204 || status == 304
}

/// The first `Content-Length` among `headers`, if it is a number.
pub fn content_length<V: AsRef<[u8]>>(headers: &[(String, V)]) -> Option<u64> {
    let (_, v) = headers.iter().find(|(n, _)| n.eq_ignore_ascii_case("content-length"))?;
    std::str::from_utf8(v.as_ref()).ok()?.trim().parse().ok()
}

impl ResponseBudget {
    pub fn new(limit: u64) -> Self {
        Self { left: limit }
    }

    pub fn left(&self) -> u64 {
        self.left
    }

    /// Whether an answer declaring `declared` bytes may start taking.
    pub fn may_start(&self, declared: Option<u64>, bodyless: bool) -> bool {
        bodyless || declared.is_none_or(|d| d <= self.left)
    }

    /// Takes `n` bytes that arrived; `false`, taking nothing, if they do
    /// not fit (the answer is then `too-large`).
    pub fn take(&mut self, n: u64) -> bool {
        match self.left.checked_sub(n) {
            Some(rest) => {
                self.left = rest;
                true
            }
            None => false,
        }
    }

    /// Gives back what a partial answer that then failed had taken.
    pub fn give_back(&mut self, n: u64) {
        self.left += n;
    }

    /// Judges an answer that arrived whole: it may start, and its body
    /// fits. `true` means it was taken.
    pub fn take_whole(&mut self, declared: Option<u64>, bodyless: bool, len: u64) -> bool {
        self.may_start(declared, bodyless) && self.take(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_take_what_arrives_until_the_budget_is_spent() {
        let mut b = ResponseBudget::new(100);
        assert!(b.take_whole(None, false, 60));
        assert!(!b.take_whole(None, false, 41), "past the budget");
        assert_eq!(b.left(), 40, "a refused answer takes nothing");
        assert!(b.take_whole(Some(40), false, 40));
        assert!(b.take_whole(None, false, 0), "an empty answer always fits");
        assert_eq!(b.left(), 0);
    }

    #[test]
    fn a_declared_length_past_what_is_left_fails_before_taking() {
        let mut b = ResponseBudget::new(100);
        assert!(!b.take_whole(Some(101), false, 5), "judged on what it declares");
        assert_eq!(b.left(), 100);
        assert!(b.may_start(Some(100), false));
        assert!(b.may_start(None, false));
    }

    #[test]
    fn a_bodyless_answer_is_judged_on_what_arrives() {
        let mut b = ResponseBudget::new(10);
        for (method, status) in [("HEAD", 200), ("head", 200), ("GET", 204), ("POST", 304)] {
            assert!(is_bodyless(method, status));
            assert!(b.take_whole(Some(1 << 30), is_bodyless(method, status), 0));
        }
        assert!(!is_bodyless("GET", 200));
        assert!(!is_bodyless("GET", 205));
        assert_eq!(b.left(), 10);
    }

    #[test]
    fn a_partial_answer_that_fails_gives_its_bytes_back() {
        let mut b = ResponseBudget::new(100);
        assert!(b.take(30));
        assert!(b.take(30));
        // The answer that took them fails.
        b.give_back(60);
        assert!(b.take_whole(None, false, 100), "a sibling gets the whole budget");
    }

    #[test]
    fn content_length_is_read_from_the_first_header() {
        fn h(pairs: &[(&str, &str)]) -> Vec<(String, Vec<u8>)> {
            pairs.iter().map(|(n, v)| (n.to_string(), v.as_bytes().to_vec())).collect()
        }
        assert_eq!(content_length(&h(&[("Content-Length", " 12 ")])), Some(12));
        assert_eq!(content_length(&h(&[("content-length", "x")])), None);
        assert_eq!(content_length(&h(&[("content-type", "1")])), None);
        assert_eq!(content_length(&h(&[("content-length", "3"), ("content-length", "4")])), Some(3));
    }
}
