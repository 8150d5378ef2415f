//! A real PostgreSQL server for tests: one per test process, started on
//! first use with `initdb` and `pg_ctl` in a temporary directory, on a
//! free loopback port, and stopped when the process ends (however it
//! ends: the server's keeper shell waits on a pipe the process holds).
//! Each test takes a database of its own ([`TestPostgres::database`]).
//!
//! PostgreSQL refuses to run as root; a test running as root runs the
//! server as the `postgres` user that Debian's package creates. The
//! binaries are found under `WASMKEEP_PG_BIN`, else on the `PATH`, else
//! in Debian's `/usr/lib/postgresql/<version>/bin`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

/// The test process's server.
pub struct TestPostgres {
    port: u16,
    /// The keeper shell, and the pipe whose closing stops the server.
    _keeper: Mutex<(Child, ChildStdin)>,
}

static SERVER: OnceLock<Result<TestPostgres, String>> = OnceLock::new();
static DATABASES: AtomicU32 = AtomicU32::new(0);

/// The process's server, started on first use.
pub fn server() -> &'static TestPostgres {
    match SERVER.get_or_init(start) {
        Ok(server) => server,
        Err(e) => panic!("{e}"),
    }
}

impl TestPostgres {
    /// The URL of database `db` on this server.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://wasmkeep@127.0.0.1:{}/{db}", self.port)
    }

    /// A new, empty database (collating by ICU's `en-US`); answers its URL.
    pub async fn database(&self) -> String {
        let name = format!("t{}_{}", std::process::id(), DATABASES.fetch_add(1, Ordering::Relaxed));
        let (client, connection) =
            tokio_postgres::connect(&self.url("postgres"), tokio_postgres::NoTls).await.expect("the test server");
        let driver = tokio::spawn(connection);
        // A linguistic collation, as production databases often have: the
        // store must not depend on the database's locale for its order.
        client
            .batch_execute(&format!(
                "CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8' LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C'"
            ))
            .await
            .expect("a test database");
        drop(client);
        let _ = driver.await;
        self.url(&name)
    }
}

fn bin_dir() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("WASMKEEP_PG_BIN") {
        return Ok(PathBuf::from(dir));
    }
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).filter(|d| d.join("initdb").is_file()).collect::<Vec<_>>())
        .unwrap_or_default();
    if let Some(dir) = on_path.into_iter().next() {
        return Ok(dir);
    }
    let mut debian: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| d.flatten().map(|e| e.path().join("bin")).filter(|b| b.join("initdb").is_file()).collect())
        .unwrap_or_default();
    debian.sort_by_key(|p| p.parent().and_then(Path::file_name).and_then(|v| v.to_str()?.parse::<u32>().ok()));
    debian.pop().ok_or_else(|| {
        "PostgreSQL's initdb was not found: install Debian's `postgresql` package (or set WASMKEEP_PG_BIN)".to_string()
    })
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| o.stdout.trim_ascii() == b"0").unwrap_or(false)
}

fn start() -> Result<TestPostgres, String> {
    let bin = bin_dir()?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("a free port: {e}"))?
        .port();
    // Not a `TempDir`: the keeper removes it once the server stops, which
    // is after this process is gone.
    let dir = tempfile::Builder::new().prefix("wasmkeep-pg-").tempdir().map_err(|e| e.to_string())?.keep();
    let script = r#"
        set -e
        "$1/initdb" -D "$2/data" -U wasmkeep --auth=trust --no-sync -E UTF8 >"$2/initdb.log" 2>&1
        "$1/pg_ctl" -D "$2/data" -l "$2/server.log" -w -t 60 \
            -o "-p $3 -k $2 -c listen_addresses=127.0.0.1 -c max_connections=400 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
            start >/dev/null
        echo ready
        read _ || true
        "$1/pg_ctl" -D "$2/data" -m immediate stop >/dev/null 2>&1 || true
        rm -rf "$2"
    "#;
    let mut command = if is_root() {
        let uid = Command::new("id").args(["-u", "postgres"]).output().map_err(|e| e.to_string())?;
        if !uid.status.success() {
            return Err("tests run as root, and there is no `postgres` user to run PostgreSQL as: install Debian's `postgresql` package".into());
        }
        let uid: u32 = String::from_utf8_lossy(&uid.stdout).trim().parse().map_err(|_| "the postgres user's id")?;
        std::os::unix::fs::chown(&dir, Some(uid), None).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--", "sh", "-c", script, "keeper"]);
        c
    } else {
        let mut c = Command::new("sh");
        c.args(["-c", script, "keeper"]);
        c
    };
    command.arg(&bin).arg(&dir).arg(port.to_string());
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("starting PostgreSQL: {e}"))?;
    let stdin = child.stdin.take().expect("piped");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line).map_err(|e| e.to_string())?;
    if line.trim() != "ready" {
        let log = std::fs::read_to_string(dir.join("initdb.log")).unwrap_or_default()
            + &std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
        return Err(format!("PostgreSQL did not start:\n{log}"));
    }
    Ok(TestPostgres { port, _keeper: Mutex::new((child, stdin)) })
}
