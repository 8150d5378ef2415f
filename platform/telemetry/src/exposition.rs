//! The Prometheus text format (version 0.0.4), written by hand: a few
//! families, each sample one line.

use std::fmt::Write;

/// An exposition being written.
#[derive(Default)]
pub struct Exposition {
    text: String,
}

impl Exposition {
    /// Starts a family: its help and type lines.
    pub fn family(&mut self, name: &str, help: &str, kind: &str) {
        let _ = writeln!(self.text, "# HELP {name} {}", help.replace('\\', "\\\\").replace('\n', "\\n"));
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
    }

    /// One sample of the family started last.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (label, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                let _ = write!(self.text, "{label}=\"{}\"", escape(v));
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {value}");
    }

    pub fn finish(self) -> String {
        self.text
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        let mut e = Exposition::default();
        e.family("x", "an \"x\"", "gauge");
        e.sample("x", &[("a", "q\"b\\c\nd"), ("b", "2")], 1.5);
        e.sample("x", &[], 3.0);
        assert_eq!(e.finish(), "# HELP x an \"x\"\n# TYPE x gauge\nx{a=\"q\\\"b\\\\c\\nd\",b=\"2\"} 1.5\nx 3\n");
    }
}
