//! The tenant control plane: tokens and their scopes, plans, the upload
//! bundle, and the provisioning API over them.

pub mod api;
pub mod bundle;
pub mod plans;
pub mod token;
