//! `wasmkeep cluster`: the operator's cluster tools.

use std::path::PathBuf;

use wasmkeep_cluster::{NodeId, cluster_dir};

#[derive(Debug, clap::Args)]
pub struct ClusterArgs {
    #[command(subcommand)]
    pub command: ClusterCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum ClusterCommand {
    /// Write a cluster directory: the cluster CA, each node's certificate
    /// and key, the shared secrets. Run again to add nodes.
    Init {
        /// The directory to write (created if missing).
        dir: PathBuf,
        /// The nodes' ids, comma separated (a,b,c).
        #[arg(long, value_name = "IDS", value_delimiter = ',', required = true)]
        nodes: Vec<String>,
    },
}

pub fn run(args: ClusterArgs) -> Result<(), String> {
    match args.command {
        ClusterCommand::Init { dir, nodes } => {
            let nodes = nodes.iter().map(|n| NodeId::parse(n.trim())).collect::<Result<Vec<_>, _>>()?;
            let added = cluster_dir::init(&dir, &nodes)?;
            let list = |v: &[NodeId]| v.iter().map(NodeId::as_str).collect::<Vec<_>>().join(", ");
            if added.is_empty() {
                println!("{}: every node named is already there; nothing written", dir.display());
            } else {
                println!("{}: wrote the identities of {}", dir.display(), list(&added));
                println!(
                    "start each node with `wasmkeep serve --cluster-dir {} --node-id <id> --store postgres://...`",
                    dir.display()
                );
            }
            Ok(())
        }
    }
}
