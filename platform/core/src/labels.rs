//! A closed set of label values as a type (`labels!`): the enum, its
//! `ALL`, each value's text beside it. The metric families take these
//! (`metric_labels`); the sets themselves live with what they name.

/// One closed set of a label's values.
pub trait Label: Copy + Eq + std::hash::Hash + std::fmt::Debug + Send + Sync + 'static {
    /// Every value, in the order a family writes them.
    const ALL: &'static [Self];
    /// The value as the exposition writes it.
    fn as_str(self) -> &'static str;
}

/// Declares a label set: the enum, its `ALL` and `as_str`, each variant's
/// text beside it, and the [`Label`] impl.
macro_rules! labels {
    (
        $(#[$meta:meta])*
        pub enum $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal,)+ }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// Every value, in order.
            pub const ALL: &'static [Self] = &[$(Self::$variant,)+];

            /// The value as the exposition writes it.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text,)+
                }
            }
        }

        impl $crate::labels::Label for $name {
            const ALL: &'static [Self] = $name::ALL;

            fn as_str(self) -> &'static str {
                $name::as_str(self)
            }
        }
    };
}
pub(crate) use labels;
