//! `wasmkeep init NAME`: a new app in `./NAME` that builds and runs with
//! `wasmkeep dev` at once, in Rust or TypeScript, from one of three
//! templates. The templates' code is the examples' under `docs/examples`
//! (tested there), beside the front template's; the files that tie an app
//! to this checkout (its manifests) are written here instead, with the SDK
//! by version.

use std::path::{Path, PathBuf};

use wasmkeep_core::AppName;

/// The SDKs' version: the WIT package's (`wasmkeep:actor@0.2.0`), which a
/// test holds equal to both SDKs' manifests.
pub const SDK_VERSION: &str = "0.2.0";

#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// The app's name (1-63 of a-z, 0-9, `-`, `_`); its directory is
    /// `./NAME`.
    pub name: String,
    /// The language of its components.
    #[arg(long, value_enum, default_value_t = Lang::Rust)]
    pub lang: Lang,
    /// What the app starts as: `counter` (one actor class), `front` (a
    /// front calling an internal counter), `chat` (a front that signs users
    /// in and hands their WebSockets to rooms).
    #[arg(long, value_enum, default_value_t = Template::Counter)]
    pub template: Template,
    /// A local SDK to build against until the SDK is published: a Rust
    /// crate's directory (`platform/sdk/rust`, or a `cargo package`d crate
    /// unpacked), or the TypeScript SDK's directory or `npm pack` tarball.
    #[arg(long, value_name = "PATH")]
    pub sdk: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    Rust,
    Ts,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Template {
    Counter,
    Front,
    Chat,
}

/// A file of a new app: its path in the app and its text.
type File = (String, String);

const COUNTER_RS: &str = include_str!("../../../docs/examples/counter/src/lib.rs");
const COUNTER_TS: &str = include_str!("../../../docs/examples/counter-ts/src/counter.ts");
const FRONT_RS: &str = include_str!("../templates/front-rust/lib.rs");
const FRONT_TS: &str = include_str!("../templates/front-ts/front.ts");
const CHAT_FRONT_RS: &str = include_str!("../../../docs/examples/chat/front/src/lib.rs");
const CHAT_FRONT_CARGO: &str = include_str!("../../../docs/examples/chat/front/Cargo.toml");
const CHAT_ROOM_RS: &str = include_str!("../../../docs/examples/chat/room/src/lib.rs");
const CHAT_ROOM_CARGO: &str = include_str!("../../../docs/examples/chat/room/Cargo.toml");
const CHAT_PAGE: &str = include_str!("../../../docs/examples/chat/front/src/page.html");
const CHAT_FRONT_TS: &str = include_str!("../../../docs/examples/chat-ts/front/src/front.ts");
const CHAT_ROOM_TS: &str = include_str!("../../../docs/examples/chat-ts/room/src/room.ts");
const CHAT_PAGE_TS: &str = include_str!("../../../docs/examples/chat-ts/front/src/page.html");

/// `wasmkeep init NAME`: writes the app, then says how to run it.
pub fn run(args: InitArgs) -> Result<(), String> {
    AppName::parse(&args.name).map_err(|e| format!("{}: {e}", args.name))?;
    let dir = PathBuf::from(&args.name);
    if dir.exists() {
        return Err(format!("{}: already exists (choose another name, or remove it)", dir.display()));
    }
    let sdk = match &args.sdk {
        Some(path) => Some(local_sdk(path, args.lang)?),
        None => None,
    };
    let files = files(&args.name, args.lang, args.template, sdk.as_deref());
    write(&dir, &files)?;
    let lang = match args.lang {
        Lang::Rust => "Rust",
        Lang::Ts => "TypeScript",
    };
    eprintln!("wasmkeep: created {} ({lang}, {:?} template)", dir.display(), args.template);
    let value = match args.template {
        Template::Chat => " --value TOKEN_SECRET=change-me",
        _ => "",
    };
    println!("cd {} && wasmkeep dev{value}", args.name);
    Ok(())
}

/// The SDK at `path`, checked to be the one `lang` needs, as an absolute path.
fn local_sdk(path: &Path, lang: Lang) -> Result<String, String> {
    let shown = path.display();
    let abs = path.canonicalize().map_err(|e| format!("--sdk {shown}: {e}"))?;
    let fits = match lang {
        Lang::Rust => {
            std::fs::read_to_string(abs.join("Cargo.toml")).is_ok_and(|t| t.contains("name = \"wasmkeep-sdk\""))
        }
        Lang::Ts => {
            (abs.is_file() && abs.extension().is_some_and(|e| e == "tgz"))
                || std::fs::read_to_string(abs.join("package.json")).is_ok_and(|t| t.contains("\"@wasmkeep/sdk\""))
        }
    };
    if !fits {
        let wanted = match lang {
            Lang::Rust => "the Rust SDK's crate directory (holding its Cargo.toml)",
            Lang::Ts => "the TypeScript SDK's directory or its npm pack tarball (.tgz)",
        };
        return Err(format!("--sdk {shown}: not {wanted}"));
    }
    abs.to_str().map(str::to_owned).ok_or_else(|| format!("--sdk {shown}: the path is not UTF-8"))
}

fn write(dir: &Path, files: &[File]) -> Result<(), String> {
    for (path, text) in files {
        let path = dir.join(path);
        let parent = path.parent().expect("a file in a directory");
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: cannot create: {e}", parent.display()))?;
        std::fs::write(&path, text).map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
    }
    Ok(())
}

/// Every file of the new app. Cargo packages keep the templates' names (an
/// app's name may start with a digit, a package's may not).
fn files(name: &str, lang: Lang, template: Template, sdk: Option<&str>) -> Vec<File> {
    let f = |path: &str, text: &str| (path.to_owned(), text.to_owned());
    let mut files = vec![f("wasmkeep.toml", &manifest(name, template))];
    match lang {
        Lang::Rust => {
            files.push(f(".gitignore", "target/\n.wasmkeep/\n"));
            match template {
                Template::Counter => {
                    files.push(f("Cargo.toml", &cargo_crate("counter", sdk)));
                    files.push(f("src/lib.rs", COUNTER_RS));
                }
                Template::Front => {
                    files.push(f("Cargo.toml", &cargo_workspace(&["front", "counter"], &[], sdk)));
                    files.push(f("front/Cargo.toml", &cargo_member("front")));
                    files.push(f("front/src/lib.rs", FRONT_RS));
                    files.push(f("counter/Cargo.toml", &cargo_member("counter")));
                    files.push(f("counter/src/lib.rs", COUNTER_RS));
                }
                Template::Chat => {
                    files.push(f("Cargo.toml", &cargo_workspace(&["front", "room"], &["serde_json = \"1\""], sdk)));
                    files.push(f("front/Cargo.toml", CHAT_FRONT_CARGO));
                    files.push(f("front/src/lib.rs", CHAT_FRONT_RS));
                    files.push(f("front/src/page.html", CHAT_PAGE));
                    files.push(f("room/Cargo.toml", CHAT_ROOM_CARGO));
                    files.push(f("room/src/lib.rs", CHAT_ROOM_RS));
                }
            }
        }
        Lang::Ts => {
            files.push(f(".gitignore", "node_modules/\ndist/\n.wasmkeep/\n"));
            let mut project = |dir: &str, package: &str, main: &str, text: &str| {
                let at = |p: &str| if dir.is_empty() { p.to_owned() } else { format!("{dir}/{p}") };
                files.push((at("package.json"), package_json(package, main, sdk)));
                files.push((at("tsconfig.json"), TSCONFIG.to_owned()));
                files.push((at(main), text.to_owned()));
            };
            match template {
                Template::Counter => project("", name, "src/counter.ts", COUNTER_TS),
                Template::Front => {
                    project("front", &format!("{name}-front"), "src/front.ts", FRONT_TS);
                    project("counter", &format!("{name}-counter"), "src/counter.ts", COUNTER_TS);
                }
                Template::Chat => {
                    project("front", &format!("{name}-front"), "src/front.ts", CHAT_FRONT_TS);
                    project("room", &format!("{name}-room"), "src/room.ts", CHAT_ROOM_TS);
                    files.push(f("front/src/page.html", CHAT_PAGE_TS));
                }
            }
        }
    }
    files
}

fn manifest(name: &str, template: Template) -> String {
    match template {
        Template::Counter => format!(
            "# A counter per name: GET /actor/counter/<name>/ adds one.\n\
             name = \"{name}\"\n\n[classes.counter]\naccess = \"open\"\ncomponent = \".\"\n"
        ),
        Template::Front => format!(
            "# A front, and a counter class only the front reaches.\n\
             name = \"{name}\"\nfront = \"front\"\n\n[classes.counter]\naccess = \"internal\"\ncomponent = \"counter\"\n"
        ),
        Template::Chat => format!(
            "# A chat: the front serves the page, signs users in with tokens signed\n\
             # by the TOKEN_SECRET value, and hands each /rooms/<room>/ws socket to\n\
             # the room (internal: only the front reaches it).\n\
             #\n#   wasmkeep dev --value TOKEN_SECRET=<a long random string>\n\
             name = \"{name}\"\nvalues = [\"TOKEN_SECRET\"]\nfront = \"front\"\n\n\
             [classes.room]\naccess = \"internal\"\ncomponent = \"room\"\n"
        ),
    }
}

/// The SDK as a dependency: by version, and while it is not published, a
/// local copy patched in (cargo's documented way to use an unpublished crate).
fn sdk_patch(sdk: Option<&str>) -> String {
    match sdk {
        Some(path) => format!(
            "\n# The SDK from a local copy until it is published; remove this to use\n\
             # crates.io's.\n[patch.crates-io]\nwasmkeep-sdk = {{ path = {} }}\n",
            toml_string(path)
        ),
        None => String::new(),
    }
}

const RELEASE_PROFILE: &str = "[profile.release]\nopt-level = \"s\"\nlto = true\nstrip = true\n";

fn cargo_crate(name: &str, sdk: Option<&str>) -> String {
    format!(
        "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2024\"\npublish = false\n\n\
         [lib]\ncrate-type = [\"cdylib\"]\n\n[dependencies]\nwasmkeep-sdk = \"{}\"\n\n{RELEASE_PROFILE}{}",
        sdk_requirement(),
        sdk_patch(sdk)
    )
}

fn cargo_workspace(members: &[&str], deps: &[&str], sdk: Option<&str>) -> String {
    let members = members.iter().map(|m| format!("\"{m}\"")).collect::<Vec<_>>().join(", ");
    let deps: String = deps.iter().map(|d| format!("{d}\n")).collect();
    format!(
        "[workspace]\nresolver = \"3\"\nmembers = [{members}]\n\n\
         [workspace.package]\nversion = \"0.1.0\"\nedition = \"2024\"\npublish = false\n\n\
         [workspace.dependencies]\nwasmkeep-sdk = \"{}\"\n{deps}\n{RELEASE_PROFILE}{}",
        sdk_requirement(),
        sdk_patch(sdk)
    )
}

fn cargo_member(name: &str) -> String {
    format!(
        "[package]\nname = \"{name}\"\nversion.workspace = true\nedition.workspace = true\npublish.workspace = true\n\n\
         [lib]\ncrate-type = [\"cdylib\"]\n\n[dependencies]\nwasmkeep-sdk.workspace = true\n"
    )
}

/// `0.2`: any SDK of the WIT package's minor version.
fn sdk_requirement() -> &'static str {
    SDK_VERSION.rsplit_once('.').map_or(SDK_VERSION, |(minor, _)| minor)
}

const TSCONFIG: &str = "{\n  \"extends\": \"@wasmkeep/sdk/tsconfig.base.json\",\n  \"include\": [\"src\"]\n}\n";

fn package_json(name: &str, main: &str, sdk: Option<&str>) -> String {
    let dependency = match sdk {
        Some(path) => format!("file:{path}"),
        None => format!("^{SDK_VERSION}"),
    };
    let json = serde_json::json!({
        "name": name,
        "private": true,
        "type": "module",
        "main": main,
        "dependencies": { "@wasmkeep/sdk": dependency },
    });
    format!("{}\n", serde_json::to_string_pretty(&json).expect("JSON"))
}

/// `s` as a TOML basic string.
fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    /// The SDKs' versions follow the WIT package's.
    #[test]
    fn both_sdks_are_versioned_as_the_wit_package() {
        let wit = std::fs::read_to_string(repo().join("wit/actor.wit")).unwrap();
        assert!(wit.contains(&format!("package wasmkeep:actor@{SDK_VERSION};")), "wit/actor.wit's package");
        let cargo: toml::Value =
            toml::from_str(&std::fs::read_to_string(repo().join("platform/sdk/rust/Cargo.toml")).unwrap()).unwrap();
        assert_eq!(cargo["package"]["version"].as_str(), Some(SDK_VERSION));
        let npm: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(repo().join("platform/sdk/ts/package.json")).unwrap())
                .unwrap();
        assert_eq!(npm["version"].as_str(), Some(SDK_VERSION));
    }

    /// Every template's manifest is one `dev` reads, naming the app.
    #[test]
    fn every_template_has_a_manifest_naming_the_app() {
        for lang in [Lang::Rust, Lang::Ts] {
            for template in [Template::Counter, Template::Front, Template::Chat] {
                let files = files("my-app", lang, template, Some("/sdk \"quoted\""));
                let dir = tempfile::tempdir().unwrap();
                write(dir.path(), &files).unwrap();
                let manifest = crate::manifest::load(dir.path()).unwrap();
                assert_eq!(manifest.name, "my-app");
                let cargo = files.iter().find(|(p, _)| p == "Cargo.toml");
                if let Some((_, text)) = cargo {
                    let parsed: toml::Value = toml::from_str(text).unwrap();
                    assert_eq!(parsed["patch"]["crates-io"]["wasmkeep-sdk"]["path"].as_str(), Some("/sdk \"quoted\""));
                }
            }
        }
    }
}
